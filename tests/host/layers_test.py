#!/usr/bin/env python3
"""Holds every #include under include/cohort to the layer table in docs/design.md, and every
header to at most MAX_LINES lines.

A header may include headers of its own folder (its detail/ folder counts as the folder) and of
folders of a lower order; never a higher order, never a folder of the same order beside its own
(p2p/ and nccl/ stand side by side), and the includes must form no cycle. The library-wide
detail/ folder holds what several folders share: each of its headers stands at the layer of the
highest folder it includes (directly or through other detail/ headers), and is held to the same
rules from there. The table rows read
`| order | `folder/` | ...`; root headers (cohort.cuh, version.cuh) stand above every layer.
"""
import os
import re
import sys

root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
include = os.path.join(root, "include", "cohort")
design = os.path.join(root, "docs", "design.md")


def layer_table(text):
    orders = {}
    for m in re.finditer(r"^\|\s*(\d+)\s*\|\s*`([a-z0-9_]+)/`", text, re.M):
        orders[m.group(2)] = int(m.group(1))
    return orders


def folder_of(rel):
    parts = rel.split("/")
    return parts[0] if len(parts) > 1 else ""


def includes_of(path, rel):
    found = []
    for line in open(path, encoding="utf-8"):
        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
        if m:
            target = os.path.normpath(os.path.join(os.path.dirname(rel), m.group(1)))
            found.append(target.replace(os.sep, "/"))
    return found


def check(include_dir, orders):
    problems = []
    graph = {}
    for dirpath, _, files in os.walk(include_dir):
        for name in files:
            if not name.endswith(".cuh"):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, include_dir).replace(os.sep, "/")
            graph[rel] = includes_of(path, rel)
    top = max(orders.values(), default=0) + 1
    shared = {}

    def layer_of(rel, seen=()):
        folder = folder_of(rel)
        if folder != "detail":
            return orders.get(folder, top)
        if rel not in shared:
            shared[rel] = max([layer_of(t, seen + (rel,)) for t in graph.get(rel, [])
                               if t in graph and t not in seen] or [0])
        return shared[rel]

    for rel, targets in sorted(graph.items()):
        folder = folder_of(rel)
        if folder == "detail":
            continue  # its layer is derived from what it includes: nothing to hold it to
        if folder and folder not in orders:
            problems.append(f"{rel}: folder '{folder}/' is not in the layer table of docs/design.md")
            continue
        mine = orders.get(folder, top)
        for target in targets:
            if target not in graph:
                problems.append(f"{rel}: includes {target}, which does not exist")
                continue
            theirs_folder = folder_of(target)
            theirs = layer_of(target)
            if theirs_folder == "detail":
                if theirs > mine:
                    problems.append(f"{rel} (layer {mine}) includes {target}, which includes "
                                    f"layer {theirs}: a layer may not include a higher one")
                continue
            if theirs_folder == folder:
                continue
            if theirs > mine:
                problems.append(f"{rel} (layer {mine}, {folder}/) includes {target} "
                                f"(layer {theirs}, {theirs_folder}/): a layer may not include a higher one")
            elif theirs == mine:
                problems.append(f"{rel} includes {target}: {folder}/ and {theirs_folder}/ stand side "
                                f"by side (layer {mine}) and may not include each other")
    # Cycles, file by file.
    state = {}
    def visit(node, trail):
        state[node] = "open"
        for nxt in graph.get(node, []):
            if state.get(nxt) == "open":
                problems.append("include cycle: " + " -> ".join(trail[trail.index(nxt):] + [nxt]))
            elif nxt in graph and nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = "done"
    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return problems, graph


# Short files with one purpose: a header past this many lines holds more than one role.
MAX_LINES = 350


def too_long(include_dir):
    problems = []
    for dirpath, _, files in os.walk(include_dir):
        for name in files:
            if name.endswith(".cuh"):
                path = os.path.join(dirpath, name)
                lines = sum(1 for _ in open(path, encoding="utf-8"))
                if lines > MAX_LINES:
                    rel = os.path.relpath(path, include_dir)
                    problems.append(f"{rel}: {lines} lines (at most {MAX_LINES}: split it by role)")
    return problems


def self_test():
    """The checker must catch an upward include, a sideways one and a cycle."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        def write(rel, *incs):
            p = os.path.join(d, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write("".join(f'#include "{i}"\n' for i in incs))
        write("low/a.cuh", "../high/b.cuh")
        write("high/b.cuh")
        write("left/c.cuh", "../right/d.cuh")
        write("right/d.cuh")
        write("low/e.cuh", "f.cuh")
        write("low/f.cuh", "e.cuh")
        write("detail/g.cuh", "../high/b.cuh")
        write("low/h.cuh", "../detail/g.cuh")
        problems, _ = check(d, {"low": 1, "high": 2, "left": 3, "right": 3})
        text = "\n".join(problems)
        assert "may not include a higher one" in text, text
        assert "side by side" in text, text
        assert "include cycle" in text, text
        assert "low/h.cuh (layer 1) includes detail/g.cuh" in text, text


def main():
    self_test()
    orders = layer_table(open(design, encoding="utf-8").read())
    if not orders:
        print("docs/design.md has no layer table")
        return 1
    problems, graph = check(include, orders)
    problems += too_long(include)
    for p in problems:
        print(p)
    edges = sum(len(v) for v in graph.values())
    print(f"{len(graph)} headers, {edges} includes, {len(orders)} layers: "
          f"{'ok' if not problems else str(len(problems)) + ' problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
