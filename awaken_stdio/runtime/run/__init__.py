"""One run of one agent on one thread, split by concern; imports run one way, down this list:

``loop`` (drives the steps) -> ``suspension`` (decisions, waiting, replay), ``recovery`` (the crash ledger),
``inference`` (request and stream) -> ``tools`` (gates, invoking a tool, effect marks) -> ``finish`` (checkpoints,
the run's end) -> ``calls`` (recording call outcomes) -> ``state`` (``RunState``: what the run holds).
"""
