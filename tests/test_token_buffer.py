"""TokenBuffer copies: copy.copy, copy.deepcopy and pickle give a buffer with
its own storage and lock, whatever either buffer does afterwards (append
with room to spare, append past the capacity, clear)."""

import copy
import pickle
import threading

import numpy as np
import pytest

from qwen4exp import SegmentBuilder, TokenBuffer

COPIES = {
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
    **{f"pickle{p}": (lambda b, p=p: pickle.loads(pickle.dumps(b, protocol=p)))
       for p in range(pickle.HIGHEST_PROTOCOL + 1)},
}


def _ids(*values):
    return np.array(values, dtype=np.int32)


@pytest.mark.parametrize("how", COPIES)
@pytest.mark.parametrize("committed", [0, 3, 16, 40])  # empty, room to spare, full, past the first capacity
def test_a_copy_is_independent(how, committed):
    original = TokenBuffer(16)
    original._append(np.arange(committed, dtype=np.int32))
    twin = COPIES[how](original)
    assert type(twin) is TokenBuffer
    assert twin.tolist() == list(range(committed)) and len(twin) == committed
    assert twin._lock is not original._lock

    original._append(_ids(100, 101))  # into the original's spare room, where a shared array would show it
    assert twin.tolist() == list(range(committed))
    twin._append(_ids(7))
    assert twin.tolist() == list(range(committed)) + [7]
    assert original.tolist() == list(range(committed)) + [100, 101]

    original.clear()
    original._append(_ids(9, 9, 9))
    assert twin.tolist() == list(range(committed)) + [7]
    twin._append(np.arange(1000, 1100, dtype=np.int32))  # grows its own storage
    assert original.tolist() == [9, 9, 9]
    assert twin.array.tolist() == list(range(committed)) + [7] + list(range(1000, 1100))
    assert not twin.array.flags.writeable


def test_a_copy_of_a_buffer_a_tokenizer_fills(tok):
    chat = SegmentBuilder().control("<|im_start|>").text("user\nhello").control("<|im_end|>").build()
    one = tok.encode_chat(chat).tolist()
    original = TokenBuffer()
    tok.encode_segments_into(chat.data, chat.segments, original)
    copies = [make(original) for make in COPIES.values()]
    tok.encode_segments_into(chat.data, chat.segments, original)
    assert original.tolist() == one + one
    for twin in copies:
        assert twin.tolist() == one
        tok.encode_segments_into(chat.data, chat.segments, twin)
        assert twin.tolist() == one + one


def test_copy_while_another_thread_appends():
    """A copy taken during appends holds a whole number of appends."""
    buf = TokenBuffer(1)
    step = np.arange(5, dtype=np.int32)
    done = threading.Event()

    def appender():
        for _ in range(2000):
            buf._append(step)
        done.set()

    t = threading.Thread(target=appender)
    t.start()
    seen = []
    while not done.is_set():
        seen.append(copy.copy(buf).tolist())
    t.join()
    for got in seen + [copy.copy(buf).tolist()]:
        assert len(got) % 5 == 0 and got == step.tolist() * (len(got) // 5)
    assert len(buf) == 10000
