"""Package list for setuptools (everything else is in pyproject.toml): ddg's packages, and
the top-level ``launch/`` folder installed under the name ``ddg_launch``, so that the
installed launcher cannot collide with another distribution's ``launch`` package."""
from setuptools import find_packages, setup

setup(packages=find_packages(include=["ddg", "ddg.*"]) + ["ddg_launch"],
      package_dir={"ddg_launch": "launch"})
