"""microTVM Project API server of mlf-project-api.

TVM's client runs this file as ``python microtvm_api_server.py --read-fd R --write-fd W
[--debug]`` with the working directory set to this file's directory (a template, or a
generated project holding model.tar). All the logic is in the installed package; this stub
only finds it, or says how to install it into the Python that runs it.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _import_main():
    try:
        from project_api.serve.server import main
    except ImportError:
        # A source checkout: the package sits beside template_project/.
        checkout = os.path.dirname(HERE)
        if not os.path.isfile(os.path.join(checkout, "project_api", "serve", "server.py")):
            raise
        sys.path.insert(0, checkout)
        from project_api.serve.server import main
    return main


def _missing(err):
    what = getattr(err, "name", None) or str(err)
    if what.split(".")[0] == "project_api":
        problem = "the Python package project_api (distribution mlf-project-api) is not installed"
    else:
        problem = f"mlf-project-api cannot start: {err} (missing module: {what})"
    python = sys.executable
    sys.stderr.write(
        f"microtvm_api_server.py: error: {problem} for {python}.\n"
        "Install it into that Python (the one TVM runs):\n"
        f"    {python} -m pip install mlf-project-api\n"
    )
    return 3


def _run():
    if sys.version_info < (3, 9):  # noqa: UP036 - TVM 0.9-0.12 environments may run 3.7/3.8
        version = sys.version.split()[0]
        sys.stderr.write(
            "microtvm_api_server.py: error: mlf-project-api needs Python >= 3.9; "
            f"{sys.executable} is {version}.\n"
        )
        return 3
    try:
        main = _import_main()
    except ImportError as err:
        return _missing(err)
    return main(sys.argv[1:], server_dir=HERE)


if __name__ == "__main__":
    sys.exit(_run())
