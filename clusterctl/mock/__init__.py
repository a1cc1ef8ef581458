"""Mock hosts that behave like machines: persistent state, simulated tools, one model.

A mock host (inventory ``transport: mock``; also every sshd mock host of the tests) answers
each program call in this order:

1. the first **profile rule** that matches (``profile.yaml`` ``commands:``; rules always win,
   and ``skip:``/``times:``/``when_state:`` let a rule inject a failure at a chosen step);
2. the **simulated tool** of that name, when the host has it (``clusterctl.mock.tools``): the file
   utilities always, the stateful machine tools only on a profile with ``simulate: true`` (a
   profile without it replays its recordings and nothing else);
3. ``sh: 1: TOOL: not found``, exit 127.

In-process, a whole line no rule matches is run by a small POSIX shell
(``clusterctl.mock.shell``: ``;``, ``&&``, ``||``, pipes, ``if``, quoting, ``$VAR``, ``$(...)``,
redirections into the host's tree); over sshd the real shell runs and calls the wrappers
of ``python -m clusterctl.mock.replay``. Both use ``MockMachine`` on the same state.

**State** (``clusterctl.mock.state``) lives in the mock cluster's folder (inventory
``mock_state:``, else ``$CLUSTERCTL_MOCK_STATE/<cluster>-<hash>``, else
``~/.local/state/clusterctl/mock/<cluster>-<hash>``; ``clusterctl mock reset`` forgets it)::

    cluster.json               shared by the cluster's hosts (joined nodes, helm releases...)
    hosts/<host>/fs/...         the host's files (profile ``files:``, ``put``, tools' writes)
    hosts/<host>/host.json      services, packages, holds, modules, sysctl, swap,
                                set_state values, rule counters

**Writing a simulated tool**: one module under ``clusterctl/mock/tools/`` with
``run(ctx: ToolContext) -> ToolResult``, one line in ``clusterctl.mock.tools.TOOLS``, and its
recorded real outputs in ``clusterctl/mock/recordings/`` (README.md names each source).
Optional module attributes: ``PACKAGES`` (the tool exists only once one of these Debian
packages is installed) and ``READS_STDIN`` (the sshd replay passes stdin only then).
``ToolContext`` gives ``argv``/``args``, ``stdin``, ``env``, ``host`` (``host.fs`` is the
host's tree: ``read``/``write``/``exists``/``glob``; ``host.edit()`` a locked read-modify-write
of ``host.json``), ``cluster`` (``cluster.edit()`` for ``cluster.json``), ``machine`` (the
profile's ``machine:`` section), ``hostname`` and ``run(line)`` to run another command on
the same host. Example, a tiny ``kubectl get nodes``::

    # clusterctl/mock/tools/kubectl.py
    from clusterctl.mock.tools.base import ToolContext, ToolResult

    PACKAGES = ("kubectl",)

    def run(ctx: ToolContext) -> ToolResult:
        if ctx.args[:2] != ["get", "nodes"]:
            return ctx.fail(f"error: unknown command {' '.join(ctx.args)!r}\\n")
        nodes = ctx.cluster.read().get("nodes") or {}
        if not nodes:
            return ctx.fail("The connection to the server localhost:8080 was refused - "
                            "did you specify the right host or port?\\n")
        rows = [f"{name:<9}{n['status']:<8}{n['roles']:<15}{n['age']:<5}{n['version']}"
                for name, n in sorted(nodes.items())]
        return ctx.ok("NAME     STATUS  ROLES          AGE  VERSION\\n" + "\\n".join(rows) + "\\n")

    # clusterctl/mock/tools/__init__.py, in TOOLS:
    #     "kubectl": "clusterctl.mock.tools.kubectl",

Messages and exit codes must be the real tool's, taken from recordings; unsupported options
answer with the tool's own usage error rather than a guess.
"""
