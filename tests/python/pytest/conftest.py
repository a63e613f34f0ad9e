"""The fixtures of hfmodels.py (a module of its own, so that the plugin
test's generated conftest can import them too)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfmodels import model, prompt  # noqa: E402,F401
