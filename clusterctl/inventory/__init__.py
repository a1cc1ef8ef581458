"""The inventory: which hosts there are and how to reach them, from any supported file format.

Entry points: ``loader.load_inventory`` and ``loader.resolve_inventory_path``, ``limit.select_hosts``
and ``checks.check_inventory``; the data types live in ``model``. Importing this package imports no
YAML library (loaders import it when called), so the CLI starts fast.
"""
