"""``etlens llm-diff BASE.pte NEW.pte --tokens T.txt``: two LLM builds token by token, down to the first divergent
layer."""

from __future__ import annotations

from ._common import add_command
from .emit import emit
from .options import EXIT_OK, add_gate, add_output, gate_failed

__all__ = ["register", "run"]

_COLUMNS = ["position", "token", "next_token", "kld", "top1_same", "top1_base", "top1_new", "topk_overlap",
            "logp_base", "logp_new"]


def register(sub) -> None:
    p = add_command(sub, "llm-diff", "two builds of one LLM (or a build and its float checkpoint) compared token by "
                    "token: KLD, top-1, perplexity, first divergent layer, phases",
                    "etlens llm-diff fp32.pte q8.pte --tokens prompt.txt --format json -o diff.json --fail-on-kld 0.05")
    p.add_argument("base", help="the reference build: a .pte, or a float checkpoint .pth (with --params)")
    p.add_argument("new", help="the build judged: a .pte, or a float checkpoint .pth (with --params)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--tokens", metavar="FILE", help="token ids fed to both builds (whitespace-separated)")
    src.add_argument("--random", type=int, metavar="N", help="a seeded random prompt of N tokens instead")
    p.add_argument("--seed", type=int, default=0, help="seed of --random (default 0)")
    p.add_argument("--etrecord-base", metavar="FILE", help="the base build's ETRecord (default: found next to the "
                   ".pte: <stem>.etrecord or etrecord.bin); needed for the per-layer comparison")
    p.add_argument("--etrecord-new", metavar="FILE", help="the new build's ETRecord (same default)")
    p.add_argument("--params", metavar="FILE", help="params.json of a checkpoint side (export_llama --params)")
    p.add_argument("--no-layers", action="store_true", help="token statistics only (no intermediate outputs)")
    p.add_argument("--topk", type=int, default=5, help="k of the top-k overlap column (default 5)")
    p.add_argument("--layer-ratio", type=float, default=None, metavar="R",
                   help="a layer departs when the error it adds exceeds R x the other layers' (default 2)")
    p.add_argument("--generate", type=int, default=0, metavar="N",
                   help="also let each build decode N tokens greedily after the prompt on its own (its own "
                   "argmax fed back) and report where the two generated sequences part (default 0: teacher "
                   "forcing only)")
    p.add_argument("--html", metavar="FILE", help="also write the report page (offline HTML)")
    p.add_argument("--keep", metavar="DIR", help="keep each build's ETDump and debug buffer in DIR")
    add_output(p)
    add_gate(p, "kld", "fail when the mean KL divergence exceeds X (nats)")
    add_gate(p, "top1", "fail when the top-1 agreement (0..1) is below Y", metavar="Y")
    p.set_defaults(func=run)


def _tokens(args, vocab_hint: int | None) -> list[int]:
    from ..analysis.llm_diff.compare import read_tokens

    if args.tokens:
        return read_tokens(args.tokens)
    import random

    from ..errors import EtlensError

    if args.random < 2:
        raise EtlensError(f"--random {args.random}: give at least 2 tokens")
    rng = random.Random(args.seed)
    return [rng.randrange(1, max(vocab_hint or 2, 2)) for _ in range(args.random)]


def run(args) -> int:
    from .._progress import console
    from ..analysis.llm_diff.compare import Side, llm_diff, pte_facts
    from ..analysis.llm_diff.layers import DEFAULT_RATIO
    from ..errors import EtlensError

    if args.topk < 1:
        raise EtlensError(f"--topk {args.topk}: must be at least 1")
    if args.layer_ratio is not None and args.layer_ratio <= 1:
        raise EtlensError(f"--layer-ratio {args.layer_ratio}: must be above 1")
    base = Side(args.base, etrecord=args.etrecord_base, params=args.params if not args.base.endswith(".pte") else None)
    new = Side(args.new, etrecord=args.etrecord_new, params=args.params if not args.new.endswith(".pte") else None)
    vocab = None
    if args.random:
        for s in (base, new):
            if s.path.endswith(".pte"):
                vocab = pte_facts(s.path).get("vocab")
                break
    tokens = _tokens(args, vocab)
    verbose = bool(getattr(args, "verbose", False))
    res = llm_diff(base, new, tokens, layers=not args.no_layers, topk=args.topk,
                   ratio=args.layer_ratio or DEFAULT_RATIO, keep=args.keep, generate=args.generate,
                   progress=(lambda m: print(f"etlens: {m}", file=console())) if verbose else None)
    from ..views.llm_diff import render_text

    emit(args, doc=res.to_json(), rows=res.positions, columns=_COLUMNS, text=lambda: render_text(res))
    if args.html:
        from ..views.llm_diff import write_html

        write_html(res, args.html)
    s = res.summary
    if args.fail_on_kld is not None and not s["kld_mean"] <= args.fail_on_kld:
        return gate_failed(f"KLD mean {s['kld_mean']:.4g} > --fail-on-kld {args.fail_on_kld}")
    if args.fail_on_top1 is not None and not s["top1_agreement"] >= args.fail_on_top1:
        return gate_failed(f"top-1 agreement {s['top1_agreement']:.4f} < --fail-on-top1 {args.fail_on_top1}")
    return EXIT_OK
