"""``dcgmi diag -r N``: per-test, per-GPU results, as a table (text) or ``-j`` JSON, DCGM 3.x and 4.x.

Text: a box table with ``| Diagnostic | Result |`` rows; category rows (``|-----  Deployment  ---``),
metadata rows (``DCGM Version``), test rows whose result is ``Pass``, ``Fail - GPU: 0``, ``Skip - All``,
and continuation rows (empty first cell) holding ``GPU0: ...`` details or ``Warning``/``Error`` rows.
JSON: DCGM 3.x puts the categories under ``"DCGM GPU Diagnostic"`` with each result's ``gpu_id`` and
``status``; 4.x under ``"DCGM Diagnostic"`` with ``entity_id`` and a per-test ``test_summary``.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from clusterctl.errors import ParseError
from clusterctl.facts.clean import clean
from clusterctl.facts.health_model import DcgmDiag, DcgmResult
from clusterctl.facts.kube import json_below, json_member
from clusterctl.facts.model import ParseWarning
from clusterctl.json_input import kind_of

_WHAT = "dcgmi diag"
_ROW = re.compile(r"^\|\s*(.*?)\s*\|\s*(.*?)\s*\|$")
_CATEGORY = re.compile(r"^[|+]-+\s+([A-Za-z][\w ]*?)\s+-+[+|]")
_STATUS = re.compile(r"^(Pass|Fail|Warn(?:ing)?|Skip|Not Run|Error)\b(?:\s*-\s*(.*))?$", re.IGNORECASE)
_GPU_LIST = re.compile(r"GPUs?:\s*([\d,\s]+)")
_GPU_DETAIL = re.compile(r"^GPU\s?(\d+)\s*:\s*(.*)$")
#: DCGM 4 names the GPU a warning or an info row is about in the name cell: ``| Warning: GPU0 | ... |``.
_NOTE_FOR_GPU = re.compile(r"^(Warning|Info):\s*GPU\s?(\d+)$")
_METADATA = {"DCGM Version": "dcgm_version", "Driver Version Detected": "driver_version",
             "GPU Device IDs Detected": "gpu_device_ids"}


def _device_ids(value: object) -> tuple[str, ...]:
    """``26b9, 26b9`` (text) or ``["26b9", "26b9"]`` (JSON) as a tuple of ids."""
    items = value if isinstance(value, list) else str(value or "").split(",")
    return tuple(str(item).strip() for item in items if str(item).strip())


def looks_like_dcgmi(text: str) -> bool:
    return ("DCGM GPU Diagnostic" in text or "DCGM Diagnostic" in text or "Successfully ran diagnostic" in text
            or bool(re.search(r"^\|\s*Diagnostic\s*\|\s*Result\s*\|", text, re.MULTILINE)))


def _status(value: str) -> str:
    word = value.strip().split(" ")[0].capitalize() if value.strip() else ""
    return {"Warning": "Warn", "Not": "Not Run"}.get(word, word)


def parse_dcgmi_diag(text: str) -> DcgmDiag:
    if '"DCGM GPU Diagnostic"' in text or '"DCGM Diagnostic"' in text:
        return _parse_json(json_below(_WHAT, text, "{"))  # an object: "[root@gpu01 ~]# dcgmi ..." opens none
    return _parse_text(text)


def _gpu_of(result: dict[str, Any]) -> int | None:
    for key in ("gpu_id", "entity_id", "gpu_ids"):
        value = result.get(key)
        if isinstance(value, (int, str)) and str(value).strip().isdecimal():  # int() reads no "²"
            return int(value)
    return None


def _listed(parent: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """``parent[key]``, a JSON list (``json_member``) of objects: a value of another type skipped would read as a
    test that passed."""
    items = json_member(_WHAT, parent, key, list, line=1)
    odd = next((kind_of(item) for item in items if not isinstance(item, dict)), None)
    if odd is not None:
        raise ParseError(_WHAT, f"an item of {key!r} is {odd}, not an object", line=1)
    return items


def _info(result: dict[str, Any]) -> str:
    info = result.get("info") or ""
    parts = [str(item) for item in info] if isinstance(info, list) else [str(info)]  # 4.x: a list of messages
    for kind in ("warning", "error"):
        parts += [str(item.get(kind) if isinstance(item, dict) else item)
                  for item in json_member(_WHAT, result, f"{kind}s", list, line=1)]
    return "; ".join(p.strip() for p in parts if p and p.strip())


def _parse_json(data: Any) -> DcgmDiag:
    if not isinstance(data, dict):
        raise ParseError(_WHAT, "JSON is not an object", line=1)
    body = data.get("DCGM Diagnostic") or data.get("DCGM GPU Diagnostic")
    if not isinstance(body, dict):
        raise ParseError(_WHAT, "no 'DCGM Diagnostic' / 'DCGM GPU Diagnostic' object", line=1)
    results: list[DcgmResult] = []
    warnings: list[ParseWarning] = []
    for category in _listed(body, "test_categories"):
        category_name = str(category.get("category", "?"))
        for test in _listed(category, "tests"):
            name = str(test.get("name", "?"))
            for result in _listed(test, "results"):
                if result.get("entity_group") in (None, "GPU"):
                    results.append(DcgmResult(category_name, name, _status(str(result.get("status", ""))),
                                              _gpu_of(result), _info(result)))
                else:
                    warnings.append(ParseWarning(f"test {name!r}: a result for {result['entity_group']!r} (not a "
                                                 "GPU) was not read"))
            summary = json_member(_WHAT, test, "test_summary", dict, line=1)
            if summary and not test.get("results"):
                results.append(DcgmResult(category_name, name, _status(str(summary.get("status", ""))), None,
                                          _info(summary)))
    metadata: dict[str, Any] = json_member(_WHAT, data, "metadata", dict, line=1)
    version = metadata.get("DCGM Version") or metadata.get("version") or body.get("version") or data.get("version")
    driver = metadata.get("Driver Version Detected") or body.get("Driver Version Detected") \
        or data.get("Driver Version Detected")
    # DCGM 3 lists the GPUs' device ids beside the diagnostic ("GPU Device IDs"); DCGM 4 under "entity_groups",
    # each GPU with its "device_id".
    ids = json_member(_WHAT, data, "GPU Device IDs", list, line=1) or [
        entity.get("device_id", "") for group in _listed(data, "entity_groups")
        if group.get("entity_group") == "GPU" for entity in _listed(group, "entities")]
    known = ("DCGM Version", "version", "Driver Version Detected")
    others = {str(k): str(v) for k, v in metadata.items() if k not in known and not isinstance(v, (dict, list))}
    return DcgmDiag(tuple(results), dcgm_version=str(version) if version else None,
                    driver_version=str(driver) if driver else None, format="json", warnings=tuple(warnings),
                    gpu_device_ids=_device_ids(ids), metadata=others)


def _value_cell(raw: str) -> tuple[str, bool]:
    """The result cell as dcgmi printed it (leading spaces kept) and whether it is full to the width dcgmi
    cuts long text at: one pad space before, two after (``| <46 wide> |`` holds 45 characters)."""
    cell = raw[raw.index("|", 1) + 1:-1]
    text = cell[1:].rstrip()
    return text, len(text) >= len(cell) - 3


def _named_gpu_result(results: list[DcgmResult], value: str, gpu: int | None = None) -> int:
    """``Info``/``Warning`` rows of a test name the GPU they are about (``GPU 1 GPU to Host bandwidth``, or
    ``gpu`` from DCGM 4's name cell): that GPU's result of the test, else the test's last result."""
    found = re.match(r"GPU\s?(\d+)\b", value)
    named = gpu if gpu is not None else int(found.group(1)) if found else None
    last = results[-1]
    for index in range(len(results) - 1, -1, -1):
        result = results[index]
        if (result.category, result.test) != (last.category, last.test):
            break
        if named is not None and result.gpu == named:
            return index
    return len(results) - 1


def _parse_text(text: str) -> DcgmDiag:
    results: list[DcgmResult] = []
    pasted = clean(text)
    warnings = pasted.elision_warnings("rows", "the tests there are unknown, not passed")
    meta: dict[str, str] = {}
    category = "?"
    saw_table = False
    target = -1  # the result the row above added its text to: a wrapped row goes on there
    cut_at_width = False  # the row above filled the cell: dcgmi went on with the same text on this row
    for line in pasted.lines:
        raw = line.text.strip()
        heading = _CATEGORY.match(raw)
        if heading:
            category = heading.group(1).strip()
            saw_table = True
            continue
        if raw.startswith("+") or set(raw) <= set("+=-| "):
            continue
        row = _ROW.match(raw)
        if not row:
            if raw.startswith("|"):
                warnings.append(ParseWarning(f"unreadable table row {raw[:80]!r} (clipped?)", line.number))
            elif saw_table and raw:
                # Inside the table every line is a row or a rule: anything else was pasted in or cut.
                warnings.append(ParseWarning(f"line {raw[:80]!r} inside the result table not read", line.number))
            continue
        name, value = row.group(1), row.group(2)
        note_for = _NOTE_FOR_GPU.match(name)
        name, note_gpu = (note_for.group(1), int(note_for.group(2))) if note_for else (name, None)
        cell, wrapped = _value_cell(raw)
        detail = _GPU_DETAIL.match(value)
        # DCGM 4's next GPU's result (``|  | GPU1: Pass |``) follows a warning that may fill the cell exactly.
        entity_status = bool(detail and _STATUS.match(detail.group(2)))
        wraps_on = cut_at_width and not name and not entity_status and 0 <= target < len(results)
        cut_at_width = wrapped
        if name == "Diagnostic" and value == "Result":
            saw_table = True
            continue
        if name in _METADATA:
            meta[_METADATA[name]] = value
            continue
        status = _STATUS.match(value)
        # "| | Fail - GPU: 0" under "| GPU Memory | Pass - GPUs: 1, 2 |": more GPUs of the test above.
        more_gpus = not name and status is not None and bool(results) and _GPU_LIST.search(status.group(2) or "")
        if status and ((name and name not in ("Warning", "Error", "Info")) or more_gpus):
            name = name or results[-1].test
            state, rest = _status(status.group(1)), status.group(2) or ""
            listed = _GPU_LIST.search(rest)
            if listed:
                for listed_gpu in (int(g) for g in re.findall(r"\d+", listed.group(1))):
                    results.append(DcgmResult(category, name, state, listed_gpu, "", line.number))
            else:
                results.append(DcgmResult(category, name, state, None, rest, line.number))
            target = len(results) - 1
            continue
        if wraps_on:
            # dcgmi cuts long text at the cell's width, mid-word or not: "... Reset GPU. R" / "estart DCGM."
            # is one word; a cut that fell on a space leaves it at the start of the next row (" remappings").
            results[target] = replace(results[target], info=(results[target].info + cell).strip())
            continue
        if name == "Error" and (not results or results[-1].line is None or results[-1].status != "Fail"):
            # A diagnostic that failed before any test ran (DCGM 3.x "Deployment" errors).
            named = re.search(r"GPU\s?(\d+)", value)
            results.append(DcgmResult(category, "Error", "Fail", int(named.group(1)) if named else None, value,
                                      line.number))
            target = len(results) - 1
            continue
        if results and (not name or name in ("Warning", "Error", "Info")):
            if name or target < 0:
                target = _named_gpu_result(results, value, note_gpu)
            last = results[target]
            gpu: int | None = int(detail.group(1)) if detail else last.gpu
            info = detail.group(2) if detail else value
            sub = _STATUS.match(info)
            if detail and sub and not name:
                results.append(DcgmResult(last.category, last.test, _status(sub.group(1)), gpu, "", line.number))
                target = len(results) - 1
            else:
                joined = replace(last, info=(last.info + " " + info).strip())
                if name == "Error":
                    joined = replace(joined, status="Fail", gpu=last.gpu if last.gpu is not None else gpu)
                results[target] = joined
            continue
        if name and value and name not in ("Warning", "Info"):  # a note above any test (a paste cut above it)
            meta.setdefault(name, value)
        elif name or value:
            warnings.append(ParseWarning(f"row {raw[:80]!r} is neither a test nor a detail of one: not read",
                                         line.number))
    if not saw_table and not results:
        raise ParseError(_WHAT, "no '| Diagnostic | Result |' table and no JSON object", line=1)
    return DcgmDiag(tuple(results), dcgm_version=meta.pop("dcgm_version", None),
                    driver_version=meta.pop("driver_version", None), format="text", warnings=tuple(warnings),
                    gpu_device_ids=_device_ids(meta.pop("gpu_device_ids", "")), metadata=meta)
