"""The one action engine: every command that changes hosts is an ordered list of phases run here.

``phase.py`` (the ``Phase`` contract: check, plan ``Change``s, apply through the gate, wait,
verify, rollback), ``run.py`` (``run_phases``: hosts all at once or in batches, serial and
once-per-cluster phases, the report with its ``Status``, Ctrl-C and SIGTERM), ``lock.py`` (the
one host lock), ``progress.py`` (the one progress file, ``--resume``), ``read_ahead.py`` and
``confirm.py`` (a host's reads in one round trip). The undo journal it writes before each change
is ``clusterctl.undo_journal.WriteAheadJournal``. No command keeps a lock, a progress file or an
interrupt handler of its own (``tests/core/test_one_engine.py``).
"""
