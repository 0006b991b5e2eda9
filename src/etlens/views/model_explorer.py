"""Export any program to Google's Model Explorer: graph JSON, partition styles, node-data overlays.

Model Explorer (``pip install ai-edge-model-explorer``) opens a *graph collection* JSON —
``{"label": ..., "graphs": [{"id", "nodes": [{"id", "label", "namespace", "attrs",
"incomingEdges": [{"sourceNodeId", "sourceNodeOutputId", "targetNodeInputId"}],
"outputsMetadata", "subgraphIds"}]}]}`` — where a node's ``namespace`` (``a/b/c``) puts it in
nested, collapsible layers. etlens writes three files:

* the graph JSON (:func:`to_model_explorer_json`). By default namespaces follow the module
  hierarchy (``blocks.0/depthwise``) and each delegate is one node whose lowered graph is a
  separate, clickable subgraph. With ``clusters=True`` (ExecuTorch's ``visualize_with_clusters``
  grouping) each delegate is expanded in place and nodes are grouped as
  ``partition <i> (<name>)/cluster (<name>)``; the callbacks ``get_node_partition_name`` /
  ``get_node_qdq_cluster_name`` decide the groups (for in-memory programs they receive the
  ``torch.fx.Node``, as in ExecuTorch; for files the etlens :class:`~etlens.model.Node`);
* a style-rules JSON (:func:`style_rules`) that colours each partition - load it in Model
  Explorer's "Custom node styler" (the graph JSON also carries ``groupNodeConfigs`` so partition
  layers are tinted without it);
* node-data JSON overlays (:func:`node_data`): one number per node (latency, numeric gap …),
  keyed by node id or by debug handle.

:func:`visualize` / :func:`visualize_with_clusters` open Model Explorer directly when the package
is installed (honouring ``reuse_server``) and otherwise raise
:class:`~etlens.errors.BackendUnavailableError` saying how to install it.

Example::

    from etlens.views.model_explorer import write_model_explorer
    paths = write_model_explorer("model.etrecord", "graph.json", clusters=True,
                                 node_data={"latency_ms": {"aten_convolution_default": 0.42}})
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Callable, Mapping

from ..errors import BackendUnavailableError, EtlensError, FormatError, MissingDataError
from ..model import Graph, Node
from ..model.transforms import inline_delegates
from ..model.transforms import qdq_clusters as _qdq_clusters

__all__ = [
    "to_model_explorer_json",
    "style_rules",
    "node_data",
    "load_node_values",
    "write_model_explorer",
    "qdq_clusters",
    "visualize",
    "visualize_with_clusters",
    "launch",
    "PARTITION_COLORS",
]

#: Background colours given to partitions 0, 1, 2 … (cycled).
PARTITION_COLORS = ("#c8e6c9", "#bbdefb", "#ffe0b2", "#e1bee7", "#b2ebf2", "#f8bbd0", "#dcedc8", "#d7ccc8")
_BORDER_COLORS = ("#2e7d32", "#1565c0", "#ef6c00", "#6a1b9a", "#00838f", "#ad1457", "#558b2f", "#4e342e")

_INSTALL_HINT = ("install it with `pip install ai-edge-model-explorer` (or `pip install etlens[dev]`), or write "
                 "the JSON with `etlens model-explorer ARTIFACT -o graph.json` and open it in Model Explorer")


# -- namespaces and clusters -------------------------------------------------------------------------
def _module_namespace(node: Node) -> str:
    """``blocks.0/depthwise`` from ``[(blocks.0, …), (blocks.0.depthwise, …)]`` (root entries skipped)."""
    parts: list[str] = []
    prev = ""
    for path, _ty in node.module_stack:
        if not path:
            continue
        seg = path[len(prev) + 1:] if prev and path.startswith(prev + ".") else path
        if seg and (not parts or path != prev):
            parts.append(seg.replace("/", ":"))
        prev = path
    return "/".join(parts)


def _same_partition(a: Node, b: Node) -> bool:
    return a.attrs.get("partition") == b.attrs.get("partition")


def qdq_clusters(graph: Graph) -> dict[str, str]:
    """``{node name: cluster}``: each compute op with the dequantize ops feeding it and the quantize ops it feeds.

    A QDQ cluster is what a quantized backend fuses into one integer kernel (``dq → conv → q``);
    seeing them grouped shows which quantized ops were taken together. The cluster is named after
    its compute op and never crosses a partition (``attrs["partition"]``). Graphs without
    (de)quantize ops get no clusters. The rules: :func:`etlens.model.transforms.qdq_clusters`.
    """
    return _qdq_clusters(graph, same_side=_same_partition)


def _default_partition(node: Any) -> str | None:
    meta = getattr(node, "meta", None)
    if isinstance(meta, dict):  # torch.fx.Node: what a partitioner tagged
        return meta.get("delegation_tag")
    return node.attrs.get("partition") or node.attrs.get("delegation_tag")


def _default_cluster(node: Any) -> str | None:
    meta = getattr(node, "meta", None)
    if isinstance(meta, dict):
        if meta.get("cluster") is not None:
            return meta["cluster"]
        return meta.get("etlens_qdq_cluster")
    return node.attrs.get("cluster") or node.attrs.get("qdq_cluster")


# -- building the JSON --------------------------------------------------------------------------------
def _label(node: Node) -> str:
    if node.kind == "delegate" and node.delegate is not None:
        idx = "" if node.delegate.index is None else f" #{node.delegate.index}"
        return f"{node.delegate.backend_id}{idx}"
    if node.kind in ("input", "param", "output"):
        return node.kind
    target = node.target or node.name
    parts = target.replace("::", ".").split(".")
    # aten.convolution.default -> aten.convolution (the overload is in the attributes)
    return ".".join(parts[:-1]) if len(parts) >= 3 else target


def _kv(key: str, value: Any) -> dict[str, str]:
    return {"key": key, "value": value if isinstance(value, str) else json.dumps(value, default=str)}


def _me_node(node: Node, namespace: str, edges: list[dict], extra: dict[str, Any] | None = None,
             subgraph_ids: list[str] | None = None) -> dict[str, Any]:
    attrs = [_kv("name", node.name), _kv("kind", node.kind), _kv("category", node.category)]
    if node.target:
        attrs.append(_kv("target", node.target))
    if node.debug_handles:
        attrs.append(_kv("debug_handles", ",".join(str(h) for h in node.debug_handles)))
    if node.module_path:
        attrs.append(_kv("module", node.module_path))
    if node.stack_trace:
        attrs.append(_kv("stack_trace", node.stack_trace.strip().splitlines()[-1][:300]))
    if isinstance(node.attrs.get("args"), str) and node.attrs["args"]:
        attrs.append(_kv("args", node.attrs["args"][:300]))
    if node.delegate is not None:
        d = node.delegate
        attrs.append(_kv("backend_id", d.backend_id))
        if d.payload_size is not None:
            attrs.append(_kv("payload_size", str(d.payload_size)))
        if d.ops:
            attrs.append(_kv("backend_ops", ", ".join(d.ops)))
        for k, v in d.compile_specs.items():
            attrs.append(_kv(f"compile_spec.{k}", str(v)))
    for k, v in (extra or {}).items():
        if v is not None:
            attrs.append(_kv(k, v))
    outputs = []
    for i, t in enumerate(node.outputs):
        outputs.append({"id": str(i), "attrs": [_kv("shape", str(list(t.shape))), _kv("dtype", t.dtype),
                                                _kv("__tensor_tag", f"{node.name}:{i}")]})
    out = {"id": node.name, "label": _label(node), "namespace": namespace, "attrs": attrs,
           "incomingEdges": edges, "outputsMetadata": outputs}
    if subgraph_ids:
        out["subgraphIds"] = subgraph_ids
    return out


def _edges(sources: list[str]) -> list[dict[str, str]]:
    return [{"sourceNodeId": s, "sourceNodeOutputId": "0", "targetNodeInputId": str(i)} for i, s in enumerate(sources)]


def _getitem_index(node: Node) -> int:
    m = re.search(r",\s*(\d+)\s*\)?\s*$", str(node.attrs.get("args", "")))
    return int(m.group(1)) if m else 0


def _hierarchy_graphs(graph: Graph, graph_id: str) -> list[dict]:
    """Main graph with module namespaces; each delegate's lowered graph as a subgraph."""
    graphs: list[dict] = []
    nodes = []
    for node in graph:
        sub = None
        if node.delegate is not None and node.delegate.inner is not None:
            sub_id = f"{graph_id}/{node.name}"
            sub = [sub_id]
            inner_nodes = [_me_node(n, _module_namespace(n), _edges([i for i in n.inputs if i in node.delegate.inner]))
                           for n in node.delegate.inner]
            graphs.append({"id": sub_id, "nodes": inner_nodes})
        ns = _module_namespace(node)
        nodes.append(_me_node(node, ns, _edges([i for i in node.inputs if i in graph]), subgraph_ids=sub))
    return [{"id": graph_id, "nodes": nodes}] + graphs


def _flatten(graph: Graph) -> tuple[list[tuple[Node, str | None]], dict[str, list[str]]]:
    """Expand delegates in place: ``[(node, partition or None)]`` and the remapped inputs of each node.

    Built on :func:`~etlens.model.transforms.inline_delegates`, then collapsed the way Model Explorer
    shows a partition: the call node, the subgraph's output node and its bound placeholders go away
    (their readers read the value behind them); inner nodes keep their own names (``<call>.<name>``
    when that is taken) so callbacks and node data find them as in the program.
    """
    items = inline_delegates(graph)
    out_src: list[str | None] = []  # for each kept node, the inlined call it came from
    calls = {it.delegate: None for it in items if it.delegate is not None}
    call_nodes = {it.name: it.node for it in items if it.name in calls}
    alias: dict[str, str] = {}  # inlined name -> the value it stands for
    outputs: dict[str, list[str]] = {}  # inlined call -> the values it returns
    names: dict[str, str] = {}  # inlined name -> name in the collection
    parts: dict[str, str] = {}  # inlined call -> "<backend> #<index>"
    taken = {n.name for n in graph}
    out: list[tuple[Node, str | None]] = []
    inputs: dict[str, list[str]] = {}

    def value(name: str, reader: Node | None = None) -> str | None:
        while name in alias:
            name = alias[name]
        if name in outputs:  # a delegate's result: the k-th output for getitem, else the first
            outs = outputs[name]
            if not outs:
                return None
            k = _getitem_index(reader) if reader is not None and reader.target == "getitem" else 0
            return value(outs[min(k, len(outs) - 1)])
        return names.get(name, name)

    for it in items:
        node = it.node
        if it.name in calls:  # the call: what it returns, when no output node said so
            mine = [n.name for (n, _p), src in zip(out, out_src, strict=True) if src == it.name]
            outputs.setdefault(it.name, mine[-1:])
            continue
        srcs = [v for v in (value(i, node) for i in it.inputs) if v is not None]
        if it.delegate is None:
            out.append((node, None))
            out_src.append(None)
            inputs[node.name] = srcs
            continue
        if node.kind in ("input", "param") and it.inputs:
            alias[it.name] = it.inputs[0]
            continue
        if node.kind == "output":
            outputs[it.delegate] = list(it.inputs)
            continue
        call = call_nodes[it.delegate]
        d = call.delegate
        part = parts.get(it.delegate)
        if part is None:
            part = parts[it.delegate] = f"{d.backend_id} #{d.index if d.index is not None else len(parts)}"
        new = node.name if node.name not in taken else f"{call.name}.{node.name}"
        taken.add(new)
        names[it.name] = new
        copy = Node(new, kind=node.kind, target=node.target, category=node.category, inputs=[],
                    outputs=list(node.outputs), module_stack=list(node.module_stack),
                    stack_trace=node.stack_trace, debug_handles=node.debug_handles,
                    attrs=dict(node.attrs, delegate=call.name, backend_id=d.backend_id))
        out.append((copy, part))
        out_src.append(it.delegate)
        inputs[new] = srcs
    return out, inputs


def _cluster_graph(graph: Graph, graph_id: str, fx_nodes: Mapping[str, Any],
                   get_partition: Callable[[Any], str | None], get_cluster: Callable[[Any], str | None]) -> dict:
    items, inputs = _flatten(graph)
    flat = Graph(graph.name)
    for node, part in items:
        flat.add(Node(node.name, kind=node.kind, target=node.target, category=node.category,
                      inputs=[i for i in inputs[node.name] if i in flat], attrs={"partition": part}))
    auto_clusters = qdq_clusters(flat)
    # one name per expanded delegate: what the callback says about its first fx node, else "<backend> #i"
    part_names: dict[str, str] = {}
    for node, part in items:
        if part is not None and part not in part_names and node.name in fx_nodes:
            named = get_partition(fx_nodes[node.name])
            if named is not None:
                part_names[part] = named
    known: list[str] = []
    nodes = []
    for node, part in items:
        fx = fx_nodes.get(node.name)
        auto = auto_clusters.get(node.name)
        if fx is not None:
            subject = fx
            if auto is not None:  # lets the default callback see etlens' cluster; harmless meta key
                fx.meta.setdefault("etlens_qdq_cluster", auto)
        else:  # a copy, so graphs cached by readers are never modified
            extra_attrs = {}
            if part is not None:
                extra_attrs["partition"] = part
            if auto is not None and "qdq_cluster" not in node.attrs:
                extra_attrs["qdq_cluster"] = auto
            subject = dataclasses.replace(node, attrs={**node.attrs, **extra_attrs}) if extra_attrs else node
        pname = part_names.get(part, part) if part is not None else get_partition(subject)
        namespace = ""
        extra: dict[str, Any] = {}
        if pname is not None:
            if pname not in known:
                known.append(pname)
            namespace = f"partition {known.index(pname)} ({str(pname).replace('/', ':')})"
            extra["partition"] = namespace
        cname = get_cluster(subject)
        if cname is not None:
            namespace = (namespace + "/" if namespace else "") + f"cluster ({str(cname).replace('/', ':')})"
            extra["cluster"] = str(cname)
        srcs = [i for i in inputs[node.name] if i in flat]
        nodes.append(_me_node(node, namespace, _edges(srcs), extra))
    group_configs = [{"namespaceRegex": f"^partition {i} \\(.*",
                      "backgroundColor": PARTITION_COLORS[i % len(PARTITION_COLORS)],
                      "borderColor": _BORDER_COLORS[i % len(_BORDER_COLORS)]} for i in range(len(known))]
    out = {"id": graph_id, "nodes": nodes}
    if group_configs:
        out["groupNodeConfigs"] = group_configs
    return out


def _fx_node_map(res: Any) -> dict[str, Any]:
    """``{name: torch.fx.Node}`` for an in-memory program (top level and inside lowered modules)."""
    out: dict[str, Any] = {}
    gm = getattr(res, "graph_module", None)
    if gm is None:
        return out
    inner_maps: dict[str, Any] = {}
    for n in gm.graph.nodes:
        if n.op == "get_attr" and str(n.target).startswith("lowered_module"):
            lowered = getattr(gm, str(n.target), None)
            original = getattr(lowered, "original_module", None)
            if original is not None:
                g = original.graph_module.graph if hasattr(original, "graph_module") else original.graph
                for inner in g.nodes:
                    if inner.op == "call_function":
                        inner_maps.setdefault(inner.name, inner)
        else:
            out[n.name] = n
    for k, v in inner_maps.items():
        out.setdefault(k, v)
    return out


def to_model_explorer_json(obj: Any, *, method: str | None = None, clusters: bool = False, label: str | None = None,
                           get_node_partition_name: Callable[[Any], str | None] | None = None,
                           get_node_qdq_cluster_name: Callable[[Any], str | None] | None = None) -> dict:
    """The Model Explorer graph collection of ``obj`` (any program or artifact path etlens reads).

    ``obj``: a :class:`~etlens.readers.program.ResolvedProgram` (what the CLI passes: the file is read
    once, by :func:`etlens.readers.program.resolve_program`), an in-memory program, an etlens graph
    or artifact; a path is resolved through the same reader.

    ``clusters=False``: module-hierarchy namespaces, delegates as nodes with their lowered graph as
    a subgraph. ``clusters=True``: delegates expanded in place, grouped by partition and QDQ cluster
    (callbacks as in ExecuTorch's ``visualize_with_clusters``; the defaults read
    ``meta["delegation_tag"]`` / ``meta["cluster"]`` and fall back to the delegate a node was lowered
    into and etlens' own QDQ clustering).
    """
    from ..readers.program import ResolvedProgram, resolve_program

    # a path is read where files are read (readers.program); the CLI hands over the parsed program
    res = obj if isinstance(obj, ResolvedProgram) else resolve_program(obj, method, "lowered")
    graph = res.graph
    graph_id = graph.name or "graph"
    if clusters:
        fx_nodes = _fx_node_map(res)
        graphs = [_cluster_graph(graph, graph_id, fx_nodes, get_node_partition_name or _default_partition,
                                 get_node_qdq_cluster_name or _default_cluster)]
    else:
        graphs = _hierarchy_graphs(graph, graph_id)
    return {"label": label or "etlens", "graphs": graphs}


# -- style rules and node data -----------------------------------------------------------------------
def style_rules(collection: Mapping[str, Any]) -> list[dict]:
    """Model Explorer "custom node styler" rules: one colour per partition (op nodes and their layer)."""
    partitions: list[str] = []
    for g in collection.get("graphs", []):
        for n in g.get("nodes", []):
            for kv in n.get("attrs", []):
                if kv.get("key") == "partition" and kv["value"] not in partitions:
                    partitions.append(kv["value"])
            if n["label"] not in partitions and any(kv.get("key") == "kind" and kv.get("value") == "delegate"
                                                    for kv in n.get("attrs", [])):
                partitions.append(n["label"])
    rules = []
    for i, part in enumerate(partitions):
        bg = PARTITION_COLORS[i % len(PARTITION_COLORS)]
        border = _BORDER_COLORS[i % len(_BORDER_COLORS)]
        styles = {"node_bg_color": {"id": "node_bg_color", "value": bg},
                  "node_border_color": {"id": "node_border_color", "value": border}}
        esc = re.escape(part)
        if part.startswith("partition "):
            rules.append({"queries": [{"type": "node_type", "nodeType": "op_nodes"},
                                      {"type": "regex", "queryRegex": f"^partition:{esc}$", "matchTypes": ["list"]}],
                          "nodeType": "op_nodes", "styles": styles, "version": "v2"})
            rules.append({"queries": [{"type": "node_type", "nodeType": "layer_nodes"},
                                      {"type": "regex", "queryRegex": f"^{esc}$", "matchTypes": ["title"]}],
                          "nodeType": "layer_nodes", "styles": styles, "version": "v2"})
        else:  # a delegate node (hierarchy view)
            rules.append({"queries": [{"type": "node_type", "nodeType": "op_nodes"},
                                      {"type": "regex", "queryRegex": f"^{esc}$", "matchTypes": ["title"]}],
                          "nodeType": "op_nodes", "styles": styles, "version": "v2"})
    return rules


def load_node_values(path: str) -> dict[str, float]:
    """Read per-node numbers from JSON: ``{node: number}``, ``[{"node"|"name": …, "value": …}]``,
    or Model Explorer node data (``{graph_id: {"results": {node: {"value": …}}}}``)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError as exc:
        raise MissingDataError(f"{path}: no such file (node data for --node-data)") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FormatError(f"{path}: not valid JSON ({exc}); node data is a JSON object {{node: number}}") from exc
    values: dict[str, float] = {}
    if isinstance(data, list):
        for i, row in enumerate(data):
            key = row.get("node", row.get("name", row.get("id"))) if isinstance(row, dict) else None
            val = row.get("value") if isinstance(row, dict) else None
            if key is None or not isinstance(val, (int, float)) or isinstance(val, bool):
                raise FormatError(f"{path}: item {i} should be {{\"node\": name, \"value\": number}}, got {row!r:.80}")
            values[str(key)] = float(val)
        return values
    if not isinstance(data, dict):
        raise FormatError(f"{path}: node data should be a JSON object {{node: number}}, got {type(data).__name__}")
    if data and all(isinstance(v, dict) and "results" in v for v in data.values()):
        for g in data.values():
            for k, r in g["results"].items():
                if isinstance(r, dict) and isinstance(r.get("value"), (int, float)):
                    values[str(k)] = float(r["value"])
        return values
    for k, v in data.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise FormatError(f"{path}: value of {k!r} should be a number, got {v!r:.80}")
        values[str(k)] = float(v)
    return values


def node_data(collection: Mapping[str, Any], values: Mapping[str, float], name: str = "value") -> dict:
    """Model Explorer node data for ``values`` keyed by node id or by debug handle (``"12"``).

    A key that is a debug handle colours every node carrying it (what ETDump latencies are keyed
    by). Unknown keys are ignored; if none match, :class:`MissingDataError` says so.
    """
    out: dict[str, Any] = {}
    matched = 0
    for g in collection.get("graphs", []):
        results: dict[str, dict] = {}
        by_handle: dict[str, list[str]] = {}
        for n in g.get("nodes", []):
            for kv in n.get("attrs", []):
                if kv.get("key") == "debug_handles":
                    for h in str(kv["value"]).split(","):
                        by_handle.setdefault(h.strip(), []).append(n["id"])
        ids = {n["id"] for n in g.get("nodes", [])}
        for key, val in values.items():
            targets = [key] if key in ids else by_handle.get(str(key), [])
            for t in targets:
                results[t] = {"value": float(val)}
        if results:
            matched += len(results)
            out[g["id"]] = {"name": name, "results": results,
                            "gradient": [{"stop": 0, "bgColor": "#fff7ec"}, {"stop": 0.5, "bgColor": "#fdbb84"},
                                         {"stop": 1, "bgColor": "#d7301f"}]}
    if values and not matched:
        sample = ", ".join(list(values)[:3])
        raise MissingDataError(f"node data {name!r}: none of its keys ({sample} …) is a node id or debug handle "
                               "of the exported graph")
    return out


def write_model_explorer(obj: Any, output: str, *, method: str | None = None, clusters: bool = False,
                         node_data_values: Mapping[str, Mapping[str, float]] | None = None,
                         label: str | None = None, **callbacks: Any) -> dict[str, Any]:
    """Write ``output`` (graph JSON), ``<stem>.style.json`` and ``<stem>.<name>.nodedata.json`` files.

    Returns ``{"graph": path, "style": path, "node_data": {name: path}, "graphs": n, "nodes": n}``.
    """
    collection = to_model_explorer_json(obj, method=method, clusters=clusters, label=label, **callbacks)
    stem = output[:-5] if output.endswith(".json") else output
    paths: dict[str, Any] = {"graph": output, "style": f"{stem}.style.json", "node_data": {}}
    try:
        with open(output, "w", encoding="utf-8") as f:
            json.dump(collection, f)
        with open(paths["style"], "w", encoding="utf-8") as f:
            json.dump(style_rules(collection), f, indent=1)
        for name, values in (node_data_values or {}).items():
            p = f"{stem}.{name}.nodedata.json"
            with open(p, "w", encoding="utf-8") as f:
                json.dump(node_data(collection, values, name), f)
            paths["node_data"][name] = p
    except OSError as exc:
        raise EtlensError(f"{output}: cannot write the Model Explorer files ({exc.strerror or exc})") from exc
    paths["graphs"] = len(collection["graphs"])
    paths["nodes"] = sum(len(g["nodes"]) for g in collection["graphs"])
    return paths


# -- launching Model Explorer -------------------------------------------------------------------------
def _model_explorer():
    try:
        import model_explorer
    except ImportError as exc:
        raise BackendUnavailableError(f"Model Explorer is not installed: {_INSTALL_HINT}") from exc
    return model_explorer


def launch(collection: dict, reuse_server: bool, no_open_in_browser: bool,
           node_data_values: Mapping[str, Mapping[str, float]] | None, **kwargs: Any) -> Any:
    """Start (or reuse) a Model Explorer server showing ``collection`` (the JSON of
    :func:`to_model_explorer_json`) with ``node_data_values`` as node-data overlays."""
    me = _model_explorer()
    cfg = me.config()
    name = collection.get("label") or "etlens"
    # the server hands graphs_list entries to the web app as the adapter response {"graphs": [...]}
    cfg.graphs_list.append(json.dumps({"graphs": collection["graphs"]}))
    cfg.model_sources.append({"url": f"graphs://{name}/{len(cfg.graphs_list) - 1}"})
    for dname, values in (node_data_values or {}).items():
        cfg.add_node_data(dname, json.dumps(node_data(collection, values, dname)), model_name=name)
    if reuse_server:
        cfg.set_reuse_server()
    me.visualize_from_config(config=cfg, no_open_in_browser=no_open_in_browser, **kwargs)
    return cfg


def visualize(visualizable: Any, reuse_server: bool = True, no_open_in_browser: bool = False, *,
              method: str | None = None, node_data_values: Mapping[str, Mapping[str, float]] | None = None,
              **kwargs: Any) -> Any:
    """Open ``visualizable`` in Model Explorer (module-hierarchy view); same arguments as ExecuTorch's.

    Accepts everything :func:`to_model_explorer_json` does (``ExportedProgram``,
    ``EdgeProgramManager``, ``ExecutorchProgramManager``, artifact paths). ``reuse_server=True``
    sends the graph to a running Model Explorer instead of starting one. Extra ``kwargs`` go to
    ``model_explorer.visualize_from_config`` (``host``, ``port`` …). Returns the config used.
    """
    _model_explorer()
    collection = to_model_explorer_json(visualizable, method=method, label="Executorch")
    return launch(collection, reuse_server, no_open_in_browser, node_data_values, **kwargs)


def visualize_with_clusters(exported_program: Any, json_file_name: str | None = None, no_open_in_browser: bool = False,
                            reuse_server: bool = False,
                            get_node_partition_name: Callable[[Any], str | None] = _default_partition,
                            get_node_qdq_cluster_name: Callable[[Any], str | None] = _default_cluster,
                            **kwargs: Any) -> Any:
    """Partitions and QDQ clusters grouped and highlighted (ExecuTorch's signature).

    With ``json_file_name`` only the graph JSON (plus ``.style.json``) is written - Model Explorer
    need not be installed; otherwise Model Explorer is started (or reused) with the graph.
    """
    collection = to_model_explorer_json(exported_program, clusters=True, label="Executorch",
                                        get_node_partition_name=get_node_partition_name,
                                        get_node_qdq_cluster_name=get_node_qdq_cluster_name)
    if json_file_name is not None:
        stem = json_file_name[:-5] if json_file_name.endswith(".json") else json_file_name
        try:
            with open(json_file_name, "w", encoding="utf-8") as f:
                json.dump(collection, f)
            with open(f"{stem}.style.json", "w", encoding="utf-8") as f:
                json.dump(style_rules(collection), f, indent=1)
        except OSError as exc:
            raise EtlensError(f"{json_file_name}: cannot write ({exc.strerror or exc})") from exc
        return collection
    return launch(collection, reuse_server, no_open_in_browser, kwargs.pop("node_data_values", None), **kwargs)

