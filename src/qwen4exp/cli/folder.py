"""`qwen4exp folder`: a tiny model folder (qwen4exp.vocab.model_folder) to try
vLLM or transformers without downloading a model.

Exit codes: 0 written, 2 usage (an unknown format; a 3.5+ format without
--tokenizer-json), 3 an unusable --tokenizer-json, 4 OUT exists (not an empty
directory) or cannot be written.
"""

from __future__ import annotations

from qwen4exp.errors import ChatFormatError, VocabularyError
from qwen4exp.formats import chat_formats
from qwen4exp.vocab.model_folder import ModelFolderError, write_model_folder
from qwen4exp.cli.common import InputError, OutputError, UsageError, write_stdout

FOLDER_HELP = (
    "Write a tiny Hugging Face model folder for a chat format, with no weights:\n"
    "tokenizer.json, tokenizer_config.json with the format's official chat template,\n"
    "config.json of a ~10M-parameter Qwen3-architecture model and generation_config.json.\n"
    "transformers' AutoTokenizer and qwen4exp.Tokenizer.from_pretrained load it; vLLM\n"
    "serves it with random weights (its \"dummy\" load format: replies are gibberish, but\n"
    "every request goes through the real server, tokenizer and parsers; README, \"In vLLM\")."
)

EPILOG = """\
examples:
  qwen4exp folder tiny-qwen3
  qwen4exp folder tiny-2507 --chat-format qwen3-2507
  qwen4exp folder tiny-36 --chat-format qwen3.6 --tokenizer-json Qwen3.6-27B/tokenizer.json

exit codes:
  0    written
  2    usage error (bad arguments, unknown format; a qwen3.5 / 3.6 / 3.8 format
       without --tokenizer-json: that vocabulary ships as tiktoken ranks)
  3    input error: --tokenizer-json is not a tokenizer.json of the format's vocabulary
  4    output error: OUT exists and is not an empty directory, or cannot be written
       (nothing is left behind)
  130  interrupted (Ctrl-C)"""


def add_arguments(sp) -> None:
    sp.add_argument("out", metavar="OUT", help="the folder to write (must not exist, or be empty)")
    sp.add_argument("--chat-format", metavar="F", choices=chat_formats(), default="qwen3",
                    help=f"the chat format ({', '.join(chat_formats())}; default qwen3)")
    sp.add_argument("--tokenizer-json", metavar="PATH",
                    help="the tokenizer.json to copy (default: the bundled Qwen3 one; required for "
                         "qwen3.5 / 3.6 / 3.8: take a Qwen3.5/3.6 model repository's)")
    sp.add_argument("--template-file", action="store_true",
                    help="write the template as chat_template.jinja (as newer repositories do)")


def cmd_folder(args) -> int:
    try:
        path = write_model_folder(args.out, args.chat_format, tokenizer_json=args.tokenizer_json,
                                  template_file=args.template_file)
    except ModelFolderError as exc:
        raise OutputError(str(exc)) from None
    except (VocabularyError, ChatFormatError) as exc:
        if args.tokenizer_json is None:  # a 3.5+ format: its vocabulary has no bundled tokenizer.json
            raise UsageError(f"--chat-format {args.chat_format} needs --tokenizer-json PATH, the "
                             "tokenizer.json of a Qwen3.5/3.6 model repository (the package ships "
                             "that vocabulary as tiktoken ranks)") from None
        raise InputError(f"{type(exc).__name__}: {exc}") from None
    write_stdout(f"{path}\n")
    return 0
