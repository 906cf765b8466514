"""Builds actsim._core with the project's CMake and installs it with the package's data (the
shipped models and devices) inside the package, so an installed actsim needs no checkout.

Used by `pip install --no-build-isolation .` (pyproject.toml). The CMake build goes to
build/pip (ignored by git; reused, and compiled through ccache when it is on PATH)."""

import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.path.join(ROOT, "build", "pip")
        args = ["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                f"-DPython_EXECUTABLE={sys.executable}", "-DACTSIM_BUILD_TESTS=OFF",
                "-DACTSIM_BUILD_GUI=OFF", "-DACTSIM_BUILD_BENCH=OFF"]
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
        if shutil.which("ccache"):
            args += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_C_COMPILER_LAUNCHER=ccache"]
        subprocess.check_call(args)
        jobs = str(os.cpu_count() or 1)
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "actsim_core",
                               "-j", jobs])
        built = os.path.join(build_dir, "python", "actsim")
        target = os.path.dirname(self.get_ext_fullpath(ext.name))
        os.makedirs(target, exist_ok=True)
        shutil.copy2(os.path.join(built, os.path.basename(self.get_ext_filename(ext.name))),
                     self.get_ext_fullpath(ext.name))
        models = os.path.join(target, "models")
        shutil.rmtree(models, ignore_errors=True)
        shutil.copytree(os.path.join(ROOT, "models"), models)


setup(ext_modules=[Extension("actsim._core", sources=[])], cmdclass={"build_ext": CMakeBuild})
