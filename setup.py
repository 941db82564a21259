"""Builds the Cython extensions in pyx/ and the compiled bundled vocabulary.

Each pyx/_NAME.pyx becomes the extension qwen4exp._native._NAME. Cross-module
`cimport qwen4exp._native._x` needs the .pxd files under a `qwen4exp/_native/`
folder, so they are mirrored into build/pxd/qwen4exp/_native/ before cythonizing.

Environment:
  QWEN4EXP_SANITIZE=1   build with AddressSanitizer + UBSan (see README, developers)
  QWEN4EXP_DEBUG=1      -O0 -g, Cython bounds checks on
"""

import filecmp
import importlib.util
import os
import shutil

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PYX = os.path.join(HERE, "pyx")
VOCAB = os.path.join(HERE, "vocab")


def _load_compiler():
    spec = importlib.util.spec_from_file_location(
        "_qwen4exp_vocab_compile", os.path.join(HERE, "src", "qwen4exp", "vocab", "compile.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


COMPILER = _load_compiler()
COMPILED = tuple(v.compiled for v in COMPILER.VOCABULARIES.values())
# vocab/ files copied into the package beside the compiled vocabularies: the
# vocabularies' manifest, each one's license notice, and Qwen3's tokenizer files
# (the gate's reference).
DATA_FILES = ("tokenizer.json", "tokenizer_config.json", COMPILER.MANIFEST,
              *dict.fromkeys(v.license for v in COMPILER.VOCABULARIES.values()))


def write_package_data(target_pkg_dir):
    """Copy vocab/ files into <pkg>/vocab/_data and compile each bundled vocabulary."""
    data = os.path.join(target_pkg_dir, "vocab", "_data")
    for name in DATA_FILES:
        os.makedirs(os.path.dirname(os.path.join(data, name)), exist_ok=True)
        shutil.copyfile(os.path.join(VOCAB, name), os.path.join(data, name))
    for name, vocab in COMPILER.VOCABULARIES.items():
        out = os.path.join(data, vocab.compiled)
        src = os.path.join(VOCAB, vocab.source)
        if not os.path.exists(out) or os.path.getmtime(out) < max(
            os.path.getmtime(src), os.path.getmtime(COMPILER.__file__)
        ):
            COMPILER.write_arrays(COMPILER.compile_bundled(name, VOCAB), out)


class BuildPy(build_py):
    def run(self):
        super().run()
        write_package_data(os.path.join(self.build_lib, "qwen4exp"))


class BuildExt(build_ext):
    def run(self):
        super().run()
        if self.inplace:
            write_package_data(os.path.join(HERE, "src", "qwen4exp"))


def _copy_if_changed(source, target):
    """Copy only a changed file: a fresh copy's new mtime makes cythonize
    regenerate, and build_ext recompile, every module that cimports it (every
    `pip install .` compiled the whole core again)."""
    if not (os.path.exists(target) and filecmp.cmp(source, target, shallow=False)):
        shutil.copyfile(source, target)


def extensions():
    from Cython.Build import cythonize
    import numpy

    inc = os.path.join(HERE, "build", "pxd")
    mirror = os.path.join(inc, "qwen4exp", "_native")
    os.makedirs(mirror, exist_ok=True)
    open(os.path.join(inc, "qwen4exp", "__init__.pxd"), "a").close()
    open(os.path.join(mirror, "__init__.pxd"), "a").close()
    for name in os.listdir(PYX):
        if name.endswith((".pxd", ".h")):
            _copy_if_changed(os.path.join(PYX, name), os.path.join(mirror, name))

    sanitize = os.environ.get("QWEN4EXP_SANITIZE") == "1"
    debug = os.environ.get("QWEN4EXP_DEBUG") == "1" or sanitize
    cflags = ["-O1", "-g", "-fno-omit-frame-pointer"] if debug else ["-O3"]
    ldflags = []
    if sanitize:
        san = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]
        cflags += san
        ldflags += san
    cflags += ["-Wno-unused-function", "-Wno-unreachable-code"]

    exts = []
    for name in sorted(os.listdir(PYX)):
        if name.endswith(".pyx"):
            mod = name[:-4]
            exts.append(
                Extension(
                    f"qwen4exp._native.{mod}",
                    [os.path.join("pyx", name)],
                    include_dirs=[PYX, numpy.get_include()],
                    extra_compile_args=cflags,
                    extra_link_args=ldflags,
                    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
                )
            )
    directives = {
        "language_level": 3,
        "boundscheck": debug,
        "wraparound": False,
        "cdivision": True,
        "initializedcheck": debug,
        "embedsignature": True,
    }
    return cythonize(exts, include_path=[inc, PYX], compiler_directives=directives, quiet=True)


setup(
    ext_modules=extensions(),
    cmdclass={"build_py": BuildPy, "build_ext": BuildExt},
    # py.typed and the compiled modules' stubs (*.pyi): the package is typed (PEP 561)
    package_data={"qwen4exp": ["py.typed", "_native/*.pyi", "cli/example_chat.json", "runtimes/gate_oracle.json",
                               "formats/templates/*.jinja"]
                  + [f"vocab/_data/{n}" for n in DATA_FILES + COMPILED]},
)
