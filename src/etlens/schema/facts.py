"""Names the ExecuTorch runtime gives its profiling events.

The runtime's profiler wraps its own work in events with fixed names. Analyses need them to tell
framework time (loading, initialising, the whole ``execute``) from operator time, and to find the
event that stands for a delegate call (its internal events nest inside it)::

    from etlens.schema import FRAMEWORK_EVENT_NAMES, DELEGATE_CALL
    is_framework = name in FRAMEWORK_EVENT_NAMES
"""

from __future__ import annotations

__all__ = [
    "METHOD_INIT",
    "PROGRAM_LOAD_METHOD",
    "METHOD_EXECUTE",
    "FRAMEWORK_EVENT_NAMES",
    "OPERATOR_CALL",
    "DELEGATE_CALL",
]

#: Event around ``Method::init`` (building the method's runtime state, once per load).
METHOD_INIT = "Method::init"
#: Event around ``Program::load_method`` (reading a method from the program, once per load).
PROGRAM_LOAD_METHOD = "Program::load_method"
#: Event around one whole ``Method::execute`` (one inference run).
METHOD_EXECUTE = "Method::execute"
#: The framework events, in the order the runtime logs them; ExecuTorch's Inspector keeps these
#: out of per-operator statistics.
FRAMEWORK_EVENT_NAMES: tuple[str, ...] = (METHOD_INIT, PROGRAM_LOAD_METHOD, METHOD_EXECUTE)
#: Wrapper event the runtime logs around each kernel call (the kernel's own event nests inside).
OPERATOR_CALL = "OPERATOR_CALL"
#: Event the runtime logs around each call into a backend delegate.
DELEGATE_CALL = "DELEGATE_CALL"
