"""One run of one agent on one thread, split by concern (imports run one way, top to bottom):

``loop`` drives the steps -> ``suspension``, ``recovery``, ``inference`` -> ``tools`` -> ``calls`` -> ``finish``
-> ``state`` (what the run holds: conversation, record, state store, phase engine, event sink, effect ledger).
"""
