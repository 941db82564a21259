"""qwen4exp.runtimes.ray on a local cluster of two nodes of one CPU each
(ray.cluster_utils.Cluster): the pool of the issue's hang (two actors, one
per node, and no CPU left for the tasks that feed them) is refused, and the
engines run across both nodes with the local engine's ids. The module takes
about 30 s on two cores (10 s of it starting the raylets), so it is `slow`;
the same refusal on one node runs by default (test_ray.py)."""

import json
import logging
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import corpora
from helpers import batch_in_process, finishes, ray_rows, requests_with_tools

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]  # with test_ray.py's cluster


@pytest.fixture(scope="module")
def two_nodes():
    import ray
    import ray.data
    from ray.cluster_utils import Cluster

    from conftest import start_local_ray

    local = ray.is_initialized()  # the session's local cluster (conftest.ray_cluster): back after this module
    if local:
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args=dict(num_cpus=1, include_dashboard=False))
    cluster.add_node(num_cpus=1)
    try:
        ray.init(address=cluster.address, logging_level=logging.ERROR, log_to_driver=False)
        cluster.wait_for_nodes()
        ctx = ray.data.DataContext.get_current()
        ctx.execution_options.preserve_order = True
        ctx.enable_progress_bars = False
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        if local:
            start_local_ray()


def test_tokenize_dataset_across_two_nodes(two_nodes, tok):
    """Two actors would hold both nodes' only CPUs while the repartition tasks
    wait for one: refused. One actor holds one node and the tasks run on the
    other: the job spans both nodes and gives the library's ids."""
    import ray

    import qwen4exp.runtimes.ray as qray

    assert len([n for n in ray.nodes() if n["Alive"]]) == 2
    texts = [d[:2000] for d in corpora.multilingual_documents()[:120]]
    ds = ray.data.from_arrow(pa.table({"text": texts})).repartition(8)
    with pytest.raises(ValueError, match="2 CPUs on 2 nodes.*wait forever"):
        qray.tokenize_dataset(ds, column="text", kind="text", concurrency=2)
    with pytest.raises(ValueError, match="no node has 2 CPUs"):
        qray.tokenize_dataset(ds, column="text", kind="text", num_threads=2)
    out = finishes(lambda: ray_rows(qray.tokenize_dataset(ds, column="text", kind="text", batch_size=16)))
    assert out.column("ids").to_pylist() == tok.encode_batch(texts, num_threads=1)


def test_batch_engine_across_two_nodes(two_nodes, tmp_path, capsys):
    """`qwen4exp batch --engine ray`: one actor per node (each has one CPU),
    chats with tools, the local engine's output byte for byte."""
    import ray

    import qwen4exp
    import qwen4exp.runtimes.ray as qray

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # _node_of, for the workers
    pool = qray.TokenizerPool(qwen4exp.Tokenizer(), size=2)
    try:
        nodes = ray.get([pool.submit(_node_of) for _ in range(2)])
    finally:
        pool.close()
    assert len(set(nodes)) == 2  # the pool's two actors sit on the two nodes

    cols = requests_with_tools(20)
    lines = [json.dumps({k: cols[k][i] for k in cols if cols[k][i] is not None}) for i in range(20)]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    outs = {}
    for engine in ("local", "ray"):
        out = tmp_path / f"{engine}.parquet"
        code, _ = batch_in_process(capsys, src, out, "--engine", engine, "--chunk-size", "3", "-q")
        assert code == 0
        outs[engine] = pq.read_table(out)
    assert outs["ray"] == outs["local"] and outs["ray"].num_rows == 20


def _node_of(tok, threads):
    import ray

    return ray.get_runtime_context().get_node_id()
