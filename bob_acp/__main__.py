"""`python -m bob_acp`: the same as the `bob-acp` console script.

`python -m` puts the current folder first on the import path, and Bob runs inside other
people's projects: a project's own `yaml.py` or `requests.py` must never run inside Bob. So the
folder is taken off the path before anything else is imported. (The package itself is found
before this file runs, so a folder holding a `bob_acp/` of its own is still imported from:
the console script `bob-acp`, which editors are told to use, has no such step.)
"""

import os
import sys


def _without_cwd() -> None:
    here = os.getcwd()
    sys.path[:] = [entry for entry in sys.path if entry not in ("", ".") and os.path.abspath(entry) != here]
    package = sys.modules.get("bob_acp")
    source = os.path.dirname(os.path.dirname(os.path.abspath(getattr(package, "__file__", "") or here)))
    if source != here:
        return
    # The package came from this folder (a source checkout beside an installed copy): prefer
    # the installed copy, which has everything `pip install` put in it; else go on with this one.
    import importlib.util

    held = {name: module for name, module in sys.modules.items() if name == "bob_acp" or name.startswith("bob_acp.")}
    for name in held:
        del sys.modules[name]
    if importlib.util.find_spec("bob_acp") is None:
        sys.modules.update(held)


_without_cwd()
from bob_acp.cli import main  # noqa: E402

raise SystemExit(main())
