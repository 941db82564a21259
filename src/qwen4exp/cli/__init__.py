"""The `qwen4exp` command line (also `python -m qwen4exp`): `main` runs the
small commands, with the arguments `parser` builds; `batch` is the pipeline from `sources`
through an engine (`batch.LocalEngine`, or `ray_engine` on a Ray cluster) to
`sinks`; `common` holds the exit codes and the errors the commands report;
`gate` runs the model-free checks of `qwen4exp.runtimes.gate`.

The library never imports this package; `import qwen4exp.cli.main` imports
neither pyarrow nor tqdm.
"""
