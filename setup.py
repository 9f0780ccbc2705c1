"""Builds the collectors' compiled core; everything else is declared in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "collectors._core",
            sources=["collectors/_core.c"],
            depends=["collectors/_sha.h"],
            extra_compile_args=["-O2", "-std=gnu11", "-Wall", "-Wextra"],
        )
    ]
)
