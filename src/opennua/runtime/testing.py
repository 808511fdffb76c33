"""Test doubles for the runtime: scripted models and an in-memory journal.

`ScriptedModel` also backs the offline `scripted:demo` model, but a script is a test's (or
a demo's) way to drive the loop, so it lives here rather than in the runtime's API:

    from opennua.runtime.testing import InMemoryJournal, ScriptedModel, call, say
"""

from opennua.runtime._journal import InMemoryJournal, SimulatedCrash
from opennua.runtime._scripted import ScriptCall, ScriptedModel, ScriptStep, call, say

__all__ = [
    "InMemoryJournal",
    "ScriptCall",
    "ScriptStep",
    "ScriptedModel",
    "SimulatedCrash",
    "call",
    "say",
]
