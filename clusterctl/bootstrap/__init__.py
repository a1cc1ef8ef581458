"""``clusterctl bootstrap``: Kubernetes with kubeadm on containerd with the NVIDIA runtime, in phases.

How the pieces fit
------------------
* ``phase.Phase``: one step (check -> findings -> plan -> apply through the gate -> verify ->
  rollback). ``phase.PhaseContext``: what a phase sees: ``host``, ``reader`` (the host,
  read-only: ``clusterctl.host_reader.HostReader``), ``inventory``, ``options``
  (``run_data.RunOptions``) and ``shared`` (``run_data.RunData``, typed data phases share).
* ``registry.PHASES``: the one list of phases in run order (``"module:Class"``, imported on
  first use; on-demand phases such as reset marked ``default=False``).
* ``run.run_bootstrap``: runs the phases across hosts on the one action engine
  (``clusterctl.engine.run.run_phases``, through the fan-out ``Runner``); the engine takes the
  per-host lock (``engine.lock``), keeps progress for ``--resume`` (``engine.progress``), decides
  why a host skips a phase in one place (``engine.run.skip_reason``), and returns a ``RunReport``
  (per host and phase: ok / changed / failed / skipped, changes, findings, rollback lines; per
  phase: counts and time).
* ``run.run``: what the CLI calls (chooses phases, sets up progress, writes the undo journal of
  an applying run); ``run.write_plan_files`` for ``bootstrap plan --out DIR``.

How to add a phase
------------------
1. Write a module under ``clusterctl/bootstrap/phases/`` with a ``Phase[State]`` subclass::

       class Network(Phase[NetState]):
           name = "network"                      # kebab-case, unique: `bootstrap phase network`
           description = "the CNI, from templates/bootstrap/..."
           once_per_cluster = True               # optional: run on one host for the cluster
           serial = False                        # optional: one host at a time
           timeout_s = 900.0                     # optional: per host, larger than --timeout
           role = "control-plane"                # optional: only hosts with this role (not_role: without it)
           uses_cluster_settings = True          # optional: the run checks bootstrap: up front

           def applies_to(self, ctx): ...         # optional, instead of role; no host reads here
           def check(self, ctx) -> NetState: ...  # read facts through ctx.reader; change nothing
           def findings(self, ctx, state): ...    # error-level findings stop this host
           def plan(self, ctx, state) -> list[Change]: ...   # [] = nothing to do (a first-class answer)
           def verify(self, ctx) -> list[Finding]: ...       # read again after apply; errors roll back
           def rollback(self, ctx, records) -> list[Change]: ...  # optional: after the gate's undo

   A phase that acts on the cluster through its API (manifests, Helm releases) subclasses
   ``ClusterWidePhase[State]`` instead (it sets ``role = "control-plane"``, ``once_per_cluster = True``).

   ``check``, ``plan`` and ``verify`` get the host read-only (``ctx.reader``: ``run`` a command
   that reads, ``get`` a file); writing through it is a ``ReadOnlyHost`` error and simulated
   hosts refuse a read-only command that changes them. Everything that changes a host is a
   ``Change`` in ``plan``'s answer; a change verify needs for a moment (a test pod) goes through
   ``ctx.temporary(setup, cleanup)``. ``plan`` must be the same code path for plan, dry-run and
   apply: never ``if dry_run``. In plan mode a phase's ``check`` sees the host as it is *before*
   the earlier phases' planned changes, so it must plan sensibly from the inventory when a tool
   is not installed yet.
2. Add one line to ``registry.PHASES`` where it runs: ``PhaseEntry("clusterctl.bootstrap.phases.network:Network")``.
3. Data for later phases is a field of ``run_data.RunData`` (``ctx.shared``: one per run, shared
   by all hosts and phases). Put secrets in it as ``clusterctl.secret.Secret`` and hand them to
   hosts only through ``Change.stdin_secret`` or a file of mode 0600: the engine masks them
   everywhere it prints or saves. ``shared`` is not kept across runs (the progress file never
   holds values), so a phase that reads a value another phase produced must recreate it when
   absent (e.g. ``kubeadm token create`` on ``--resume``), or fail with a clear message. A new
   option of the run is a field of ``run_data.RunOptions``.
4. Cross-host checks (two hosts with one hostname) go in ``fleet_findings(states)``, asked once
   after every host's ``check`` (meant for read-only phases).
5. Tests: a phase against ``MockTransport`` profiles or the simulated hosts; plan twice, apply,
   apply again and assert the second apply reports ``ok`` with no changes, and that a plan leaves
   the hosts as they were (``tests/host_state.py``'s ``assert_hosts_unchanged``).

Who writes what on a node (containerd and the NVIDIA toolkit)
-------------------------------------------------------------
See ``phases/containerd.py`` and ``phases/nvidia_runtime.py``.
"""
