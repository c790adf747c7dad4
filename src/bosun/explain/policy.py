"""Natural-language scheduling policies: one English sentence -> a validated change.

Pipeline (every step documented in docs/why.md, "Policy language"):

1. **Normalise**: lower-case, contractions expanded, time windows recognised
   (``during the day``, ``between 9:00 and 17:00``), ``in namespace X`` joined, then a
   phrase lexicon (:data:`LEXICON`, longest phrase first) maps English words to the
   grammar's keywords (``prioritize``/``favour``/``give precedence to`` -> ``PRIO``,
   ``more important than``/``ahead of``/``before`` -> ``OVER``, ...). Filler words
   (:data:`FILLER`) are dropped; ``preferably``/``try to`` set the *soft* flag.
   A word that is neither a keyword, filler, nor a cluster name is matched to the one it
   most likely meant by :class:`~bosun.explain.nearmiss.NearMiss` (wordllama's bundled
   model); the substitution is reported, never silent.
2. **Parse** the keyword stream with the lark grammar :data:`GRAMMAR` (Earley, all
   derivations kept). Two derivations that mean different things -> refused as ambiguous.
3. **Resolve** names against the cluster (:class:`ClusterNames`): a pod group is a
   namespace, a pod label value (any key), a label ``k=v``, a PriorityClass or a workload
   name; a node group is a node label value, ``k=v``, ``zone X`` or ``gpu`` (nodes with
   GPUs). A name that means two different sets of pods or nodes is refused, as is one that
   matches nothing.
4. **Compile** (:func:`compile_policy`) to a :class:`Change`: PriorityClasses, JSON
   patches to the pods' own documents (Pod or workload template) and to nodes, and the
   KubeSchedulerConfiguration after the change. Anything the change would overwrite in
   the cluster or the given configuration is a **conflict**, refused unless the caller
   allows overwriting.
5. **Validate**: the patched cluster is read back by bosun's manifest loader and the
   configuration by its configuration parser, so the output is what ``bosun schedule``
   and ``bosun serve`` accept.
"""

from __future__ import annotations

import copy
import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

import yaml

from bosun.api.manifest import load_manifest_text
from bosun.api.types import GPU, GPU_MILLI, ClusterObjects, Pod
from bosun.errors import BosunError, InputError, InputProblem
from bosun.explain.nearmiss import NearMiss
from bosun.explain.patch import (
    TEMPLATE_PREFIX,
    DocRef,
    apply_patch,
    documents_json,
    get_path,
)
from bosun.framework.config import parse_configuration
from bosun.plugins.registry import in_tree_registry, registry_points


class PolicyRefusedError(BosunError):
    """A sentence bosun will not turn into a change.

    Attributes:
        sentence: the input.
        understood: what was understood (words, or a reading).
        not_understood: the words or the question that stopped it.
    """

    def __init__(self, sentence: str, reason: str, understood: str = "", not_understood: str = ""):
        self.sentence = sentence
        self.reason = reason
        self.understood = understood
        self.not_understood = not_understood
        msg = f"policy refused: {reason}"
        if understood:
            msg += f"\n  understood: {understood}"
        if not_understood:
            msg += f"\n  not understood: {not_understood}"
        super().__init__(msg)


# ---------------------------------------------------------------------------- lexicon

#: English phrase -> grammar keywords (space-separated; "" drops the phrase). Longest
#: phrases are matched first, left to right.
LEXICON: dict[str, str] = {
    # priority
    "prioritize": "PRIO",
    "prioritise": "PRIO",
    "favor": "PRIO",
    "favour": "PRIO",
    "give priority to": "PRIO",
    "give precedence to": "PRIO",
    "give preference to": "PRIO",
    "rank": "PRIO",
    "over": "OVER",
    "above": "OVER",
    "ahead of": "OVER",
    "before": "OVER",
    "in front of": "OVER",
    "more important than": "OVER",
    "more than": "OVER",
    "rather than": "OVER",
    "higher than": "OVER",
    "take precedence over": "OVER",
    "takes precedence over": "OVER",
    "have priority over": "OVER",
    "has priority over": "OVER",
    "get priority over": "OVER",
    "come before": "OVER",
    "comes before": "OVER",
    "go before": "OVER",
    "win over": "OVER",
    "outrank": "OVER",
    "outranks": "OVER",
    "below": "UNDER",
    "under": "UNDER",
    "after": "UNDER",
    "behind": "UNDER",
    "beneath": "UNDER",
    "less important than": "UNDER",
    "lower than": "UNDER",
    "come after": "UNDER",
    "comes after": "UNDER",
    "go after": "UNDER",
    "yield to": "UNDER",
    "first": "FIRST",
    "top priority": "FIRST",
    "highest priority": "FIRST",
    "most important": "FIRST",
    "above everything else": "FIRST",
    "above everything": "FIRST",
    "above all else": "FIRST",
    "above all": "FIRST",
    # placement
    "keep": "KEEP",
    "run": "KEEP",
    "running": "KEEP",
    "schedule": "KEEP",
    "scheduled": "KEEP",
    "place": "KEEP",
    "placed": "KEEP",
    "put": "KEEP",
    "pin": "KEEP",
    "restrict": "KEEP",
    "confine": "KEEP",
    "stay": "KEEP",
    "land": "KEEP",
    "go": "KEEP",
    "send": "KEEP",
    "on": "ON",
    "onto": "ON",
    "to": "ON",
    "in": "ON",
    "inside": "ON",
    "from": "ON",
    "within": "ON",
    "off": "OFF",
    "off of": "OFF",
    "away from": "OFF",
    "out of": "OFF",
    "avoid": "AVOID",
    "avoids": "AVOID",
    "stay off": "KEEP OFF",
    "stay away from": "KEEP OFF",
    "never": "NOT",
    "not": "NOT",
    "no": "NOT",
    "ban": "NOT KEEP",
    "exclude": "NOT KEEP",
    "forbid": "NOT KEEP",
    "prohibit": "NOT KEEP",
    "bar": "NOT KEEP",
    # soft / hard
    "prefer": "PREFER",
    "prefer to": "SOFT",
    "prefers to": "SOFT",
    "would prefer to": "SOFT",
    "prefers": "PREFER",
    "preferably": "SOFT",
    "ideally": "SOFT",
    "try to": "SOFT",
    "if possible": "SOFT",
    "when possible": "SOFT",
    "where possible": "SOFT",
    "softly": "SOFT",
    "best effort": "SOFT",
    # spreading over a topology
    "spread": "SPREAD",
    "spread out": "SPREAD",
    "distribute": "SPREAD",
    "scatter": "SPREAD",
    "balance": "SPREAD",
    "even out": "SPREAD",
    "across": "ACROSS",
    "among": "ACROSS",
    "throughout": "ACROSS",
    "zones": "ZONES",
    "zone": "ZONES",
    "availability zones": "ZONES",
    "availability zone": "ZONES",
    "regions": "REGIONS",
    "region": "REGIONS",
    "racks": "RACKS",
    "rack": "RACKS",
    "nodes": "NODES",
    "node": "NODES",
    "hosts": "NODES",
    "host": "NODES",
    "machines": "NODES",
    "machine": "NODES",
    "servers": "NODES",
    "server": "NODES",
    "instances": "NODES",
    "pool": "NODES",
    "skew": "SKEW",
    "max skew": "SKEW",
    "maxskew": "SKEW",
    "imbalance": "SKEW",
    "difference": "SKEW",
    "apart": "SKEW",
    # packing vs spreading (scoring strategy)
    "pack": "PACK",
    "bin pack": "PACK",
    "bin-pack": "PACK",
    "binpack": "PACK",
    "consolidate": "PACK",
    "as few nodes as possible": "PACK",
    "fewest nodes": "PACK",
    "fill nodes": "PACK",
    "fill up nodes": "PACK",
    "most allocated": "PACK",
    "tightly": "",
    "densely": "",
    "spread load": "SPREADLOAD",
    "spread the load": "SPREADLOAD",
    "spread out the load": "SPREADLOAD",
    "balance load": "SPREADLOAD",
    "balance the load": "SPREADLOAD",
    "load balance": "SPREADLOAD",
    "least allocated": "SPREADLOAD",
    "as many nodes as possible": "SPREADLOAD",
    "emptiest nodes": "SPREADLOAD",
    # GPU share
    "share": "SHARE",
    "to share": "SHARE",
    "split": "SHARE",
    "give": "SHARE",  # PRIO when the sentence has no GPU amount (see normalize)
    "gpu": "GPU",
    "gpus": "GPU",
    "graphics cards": "GPU",
    "graphics card": "GPU",
    "accelerators": "GPU",
    "fragmentation": "FRAG",
    "fragment": "FRAG",
    "fragmenting": "FRAG",
    "fragmented": "FRAG",
    # score plugin weights
    "weight": "WEIGHT",
    "weigh": "WEIGHT",
    "score weight": "WEIGHT",
    # labels and namespaces
    "labeled": "LABEL",
    "labelled": "LABEL",
    "with label": "LABEL",
    "label": "LABEL",
}
#: Words that carry no meaning for the grammar (articles, modals, pod-group heads).
FILLER = frozenset(
    """the a an all every our my your their its please should must always only strictly be
    is are that so we i want need would like let make sure ensure any of it them they
    those these with each apiece per workloads workload pods pod jobs job apps
    containers services deployments tasks replicas cluster clusters minimize minimise
    reduce cut lower less do does can will shall could might may allowed allow allows at
    most maximum max up no-more-than by evenly equally tier tiers group groups set sets
    class classes kind kinds type types and everything everyone use using priority
    precedence set change""".split()  # noqa: SIM905
)
#: Fractions of a GPU said in words, in milli-GPU.
_NUMBER_WORDS = {"half": 500, "quarter": 250, "third": 333, "tenth": 100, "fifth": 200}
#: Named time windows (start, end), 24-hour clock.
WINDOWS = {
    "during the day": ("08:00", "20:00"),
    "during the daytime": ("08:00", "20:00"),
    "in the daytime": ("08:00", "20:00"),
    "in the day": ("08:00", "20:00"),
    "by day": ("08:00", "20:00"),
    "daytime": ("08:00", "20:00"),
    "during business hours": ("09:00", "17:00"),
    "during working hours": ("09:00", "17:00"),
    "during office hours": ("09:00", "17:00"),
    "in business hours": ("09:00", "17:00"),
    "in working hours": ("09:00", "17:00"),
    "business hours": ("09:00", "17:00"),
    "working hours": ("09:00", "17:00"),
    "office hours": ("09:00", "17:00"),
    "at night": ("20:00", "08:00"),
    "during the night": ("20:00", "08:00"),
    "overnight": ("20:00", "08:00"),
    "nightly": ("20:00", "08:00"),
    "at nighttime": ("20:00", "08:00"),
}
_TIME = r"(\d{1,2})(?::(\d{2}))?\s*(am|pm)?"
_RANGE = re.compile(rf"\b(?:between|from)\s+{_TIME}\s+(?:and|to|until|till)\s+{_TIME}")
_CONTRACTIONS = {
    "don't": "do not",
    "doesn't": "does not",
    "shouldn't": "should not",
    "mustn't": "must not",
    "can't": "cannot",
    "cannot": "not",
    "won't": "will not",
    "isn't": "is not",
    "aren't": "are not",
}

#: The policy grammar over the keyword stream (lark, Earley). ``WORD`` is any other word,
#: ``PAIR`` a ``key=value`` label, ``NUMBER`` an integer, ``AMOUNT`` a GPU share in milli
#: (time windows are taken out before parsing, wherever they are in the sentence).
GRAMMAR = r"""
start: policy

?policy: prio | place | spread | strategy | share | frag | weight

prio: lead? group lead? "OVER" group      -> prio_over
    | lead? group lead? "UNDER" group     -> prio_under
    | lead? group "FIRST"                 -> prio_first
    | "FIRST" group                       -> prio_first
lead: "PRIO" | "KEEP" | "PREFER"

place: "KEEP" group "ON" nodes            -> place_on
     | group "KEEP" "ON" nodes            -> place_on
     | group "ON" nodes                   -> place_on
     | "PREFER" group "ON" nodes          -> prefer_on
     | group "PREFER" "ON"? nodes         -> prefer_on
     | "KEEP" group "OFF" nodes           -> place_off
     | group "KEEP" "OFF" nodes           -> place_off
     | group "OFF" nodes                  -> place_off
     | "NOT" "KEEP" group "ON" nodes      -> place_off
     | group "NOT" "KEEP" "ON" nodes      -> place_off
     | group "NOT" "ON" nodes             -> place_off
     | "KEEP" "NOT" group "ON" nodes      -> place_off
     | group "AVOID" "KEEP"? "ON"? nodes  -> place_off
     | "AVOID" "KEEP"? group "ON" nodes   -> place_off
     | "AVOID" "KEEP" nodes "ON" group    -> place_off_rev

spread: "SPREAD" group across topo skew?  -> spread
      | group "SPREAD"? across topo skew? -> spread
      | "KEEP" group across topo skew?    -> spread
      | "SPREAD" across topo skew?        -> spread_nogroup
across: "ACROSS" | "OVER"
skew: "SKEW" NUMBER | NUMBER "SKEW"
!topo: "ZONES" | "NODES" | "REGIONS" | "RACKS"

strategy: "PREFER"? "PACK" (filler | "PACK")*       -> pack
        | "PREFER"? "PACK" group (filler | "PACK")* -> pack
        | "PREFER"? "SPREADLOAD" (filler | "SPREADLOAD")* -> spread_load
        | "PREFER"? "SPREADLOAD" group (filler | "SPREADLOAD")* -> spread_load
filler: "ON" | "NODES" | "ACROSS" | "OVER"

share: "SHARE" group "GPU"? AMOUNT "GPU"?  -> share
     | group "SHARE" "GPU"? AMOUNT "GPU"?  -> share
     | "SHARE" "GPU" "ACROSS"? group AMOUNT -> share
frag: "AVOID"? "GPU"? "FRAG" "GPU"?        -> frag
weight: "WEIGHT" pname "ON"? NUMBER        -> weight
      | pname "WEIGHT" "ON"? NUMBER        -> weight
!pname: (WORD | "NODES" | "SPREAD" | "GPU")+

group: name | "LABEL"? PAIR | "NAMESPACE" WORD
name: WORD+
nodes: nname "NODES"? | "NODES" nname | "NODES"? "LABEL"? PAIR "NODES"?
     | "ZONES" WORD -> zone_nodes
     | WORD "ZONES" -> zone_nodes
!nname: (WORD | "GPU")+

PAIR: /[a-z0-9][a-z0-9._\/-]*=[a-z0-9._-]*/
AMOUNT: /M\d+/
NUMBER: /\d+/
WORD: /[a-z0-9][a-z0-9._-]*/
%ignore " "
"""

_KEYWORDS = frozenset(
    """PRIO OVER UNDER FIRST KEEP ON OFF AVOID NOT PREFER SOFT SPREAD ACROSS ZONES REGIONS
    RACKS NODES SKEW PACK SPREADLOAD SHARE GPU FRAG LABEL NAMESPACE""".split()  # noqa: SIM905
)


@lru_cache(maxsize=1)
def _parser() -> Any:
    from lark import Lark

    return Lark(GRAMMAR, parser="earley", ambiguity="explicit", lexer="dynamic")


# ---------------------------------------------------------------------------- normalise


@dataclass
class Normalized:
    """A sentence as the grammar sees it.

    Attributes:
        tokens: keywords and words.
        soft: a preference, not a requirement (``preferably``, ``try to``).
        window: ``(start, end)`` on the 24-hour clock, or None.
        notes: near-miss substitutions and other readings, in words.
    """

    tokens: list[str]
    soft: bool = False
    sources: list[str] = field(default_factory=list)
    window: tuple[str, str] | None = None
    amount: int | None = None
    notes: list[str] = field(default_factory=list)


def _clock(h: str, m: str | None, ampm: str | None) -> str | None:
    hour, minute = int(h), int(m or 0)
    if ampm == "pm" and hour < 12:
        hour += 12
    if ampm == "am" and hour == 12:
        hour = 0
    if not (0 <= hour <= 23 and 0 <= minute <= 59):
        return None
    return f"{hour:02d}:{minute:02d}"


def _singular(word: str, known: frozenset[str]) -> str:
    for cut in ("es", "s"):
        if word.endswith(cut) and word[: -len(cut)] in known:
            return word[: -len(cut)]
    return word


_LEX_MAX = max(len(k.split()) for k in LEXICON)


def normalize(sentence: str, names: frozenset[str], near: NearMiss | None) -> Normalized:
    """The keyword stream of ``sentence`` (step 1 of the module docstring).

    Args:
        sentence: the policy, in English.
        names: every cluster name (namespaces, label values and keys, PriorityClasses,
            workload and node names) so that they are not "corrected".
        near: the near-miss matcher (None: no correction).

    Raises:
        PolicyRefusedError: an empty sentence, or a time that is not a time.
    """
    text = sentence.strip().lower().replace("\u2019", "'")
    if not text:
        raise PolicyRefusedError(sentence, "the sentence is empty")
    for k, v in _CONTRACTIONS.items():
        text = text.replace(k, v)
    out = Normalized([])
    m = _RANGE.search(text)
    if m:
        a, b = _clock(*m.group(1, 2, 3)), _clock(*m.group(4, 5, 6))
        if a is None or b is None:
            raise PolicyRefusedError(sentence, "a time window is not on the clock", "", m.group(0))
        out.window = (a, b)
        text = text[: m.start()] + " W0 " + text[m.end() :]
    for phrase in sorted(WINDOWS, key=len, reverse=True):
        if re.search(rf"\b{phrase}\b", text):
            if out.window is not None:
                raise PolicyRefusedError(sentence, "two time windows", "", phrase)
            out.window = WINDOWS[phrase]
            text = re.sub(rf"\b{phrase}\b", " W0 ", text, count=1)
            break
    text = re.sub(r"\bzone (?!zone-)([a-z0-9][a-z0-9-]*)\b", r"zone zone-\1", text)
    text = re.sub(r"\bin (?:the )?namespace ([a-z0-9-]+)", r" NAMESPACE \1 ", text)
    text = re.sub(r"\b(?:in )?the ([a-z0-9-]+) namespace\b", r" NAMESPACE \1 ", text)
    text = re.sub(r"\bnamespace ([a-z0-9-]+)", r" NAMESPACE \1 ", text)
    # GPU amounts: 25%, 25 percent, 250m / 250 milli, half / a quarter (of a GPU)
    amount_re = re.compile(
        r"\b(\d{1,4})\s*(%|percent\b|per cent\b|m\b|milli\b|millis\b|milligpu\b)"
        r"|\b(half|quarter|third|tenth|fifth)\b"
    )
    am = amount_re.search(text)
    if am and re.search(r"\b(gpu|gpus|share|split|give)\b", text):
        if am.group(3):
            milli = _NUMBER_WORDS[am.group(3)]
        else:
            n, unit = int(am.group(1)), am.group(2)
            milli = n * 10 if unit.startswith(("%", "percent", "per")) else n
        out.amount = milli
        text = text[: am.start()] + " M0 " + text[am.end() :]
    text = re.sub(r"\bgive (?:priority|precedence|preference) to\b", "prioritize", text)
    if out.amount is None:
        text = re.sub(r"\bgive\b", "prioritize", text)
    words = re.findall(r"[a-z0-9][a-z0-9._/=-]*|[A-Z]+\d*", text.replace(",", " "))
    keys = frozenset(w for k in LEXICON for w in k.split()) | FILLER | set(_NUMBER_WORDS)
    fixed: list[str] = []
    for w in words:
        if w.isupper() or w in names or w in keys or "=" in w or w.isdigit():
            fixed.append(w)
            continue
        s = _singular(w, keys | names)
        if s != w:
            fixed.append(s)
            continue
        hit = near.match(w) if near is not None else None
        if hit is not None:
            out.notes.append(f"read {w!r} as {hit[0]!r} (near-miss, score {hit[1]:.2f})")
            fixed.append(hit[0])
        else:
            fixed.append(w)
    i = 0
    while i < len(fixed):
        w = fixed[i]
        if w == "W0":
            i += 1  # the window is kept in out.window, wherever it was said
            continue
        if w.isupper():
            out.tokens.append(w)
            out.sources.append(
                {"W0": "<time window>", "M0": "<GPU amount>", "NAMESPACE": "namespace"}.get(w, w)
            )
            i += 1
            continue
        for n in range(min(_LEX_MAX, len(fixed) - i), 0, -1):
            phrase = " ".join(fixed[i : i + n])
            if phrase in LEXICON:
                for kw in LEXICON[phrase].split():
                    if kw == "SOFT":
                        out.soft = True
                    else:
                        out.tokens.append(kw)
                        out.sources.append(phrase)
                i += n
                break
        else:
            if w not in FILLER and w not in _NUMBER_WORDS:
                out.tokens.append(w)
                out.sources.append(w)
            i += 1
    return out


# ---------------------------------------------------------------------------- intents


@dataclass(frozen=True)
class GroupRef:
    """A pod or node group as written: ``kind`` is ``name``, ``label``, ``namespace``,
    ``zone`` or ``all``; ``text`` the words."""

    kind: str
    text: str


@dataclass(frozen=True)
class Intent:
    """What a sentence asks for, before names are resolved.

    Attributes:
        form: ``priority``, ``priority-first``, ``placement``, ``spread``, ``strategy``,
            ``gpu-share`` or ``gpu-fragmentation``.
        pods: the pod group (``priority``: the one to favour).
        other: the pod group to rank below (``priority`` only).
        nodes: the node group (``placement``).
        on: keep on (True) or off (False) the nodes.
        soft: a preference instead of a requirement.
        topology: ``zones``/``nodes``/``regions``/``racks`` (``spread``).
        skew: maxSkew (``spread``).
        strategy: ``MostAllocated`` or ``LeastAllocated``.
        milli: GPU share per pod in milli-GPU (``gpu-share``).
        window: active time window.
        plugin: the Score plugin as written (``score-weight``).
        weight: its new weight (``score-weight``).
    """

    form: str
    pods: GroupRef | None = None
    other: GroupRef | None = None
    nodes: GroupRef | None = None
    on: bool = True
    soft: bool = False
    topology: str = ""
    skew: int = 1
    strategy: str = ""
    milli: int = 0
    window: tuple[str, str] | None = None
    plugin: str = ""
    weight: int = 0

    def words(self) -> str:
        """The intent in plain words (what was understood)."""
        g = self.pods.text if self.pods else ""
        w = f" during {self.window[0]}-{self.window[1]}" if self.window else ""
        how = "prefer to " if self.soft else ""
        if self.form == "priority":
            assert self.other is not None
            return f"give pods '{g}' priority over pods '{self.other.text}'{w}"
        if self.form == "priority-first":
            return f"give pods '{g}' priority over every other pod{w}"
        if self.form == "placement":
            assert self.nodes is not None
            side = "on" if self.on else "off"
            return f"{how}keep pods '{g}' {side} nodes '{self.nodes.text}'{w}"
        if self.form == "spread":
            return f"{how}spread pods '{g}' across {self.topology} (maxSkew {self.skew}){w}"
        if self.form == "strategy":
            who = f" for pods '{g}' (their own profile)" if self.pods else ""
            return f"score nodes {self.strategy}{who}{w}"
        if self.form == "gpu-share":
            return f"pods '{g}' take {self.milli} milli-GPU each (shared GPUs){w}"
        if self.form == "score-weight":
            return f"Score plugin '{self.plugin}' gets weight {self.weight}{w}"
        return f"minimise GPU fragmentation (FGD score){w}"


def _tok_text(tree: Any) -> str:
    from lark import Token

    return " ".join(str(t) for t in tree.scan_values(lambda v: isinstance(v, Token)))


def _group(tree: Any) -> GroupRef:
    from lark import Token

    kids = tree.children
    if len(kids) == 1 and isinstance(kids[0], Token) and kids[0].type == "PAIR":
        return GroupRef("label", str(kids[0]))
    if len(kids) == 1 and isinstance(kids[0], Token) and kids[0].type == "WORD":
        return GroupRef("namespace", str(kids[0]))
    return GroupRef("name", _tok_text(tree))


def _nodes(tree: Any) -> GroupRef:
    from lark import Token

    if tree.data == "zone_nodes":
        return GroupRef("zone", _tok_text(tree))
    pairs = list(tree.scan_values(lambda v: isinstance(v, Token) and v.type == "PAIR"))
    if pairs:
        return GroupRef("label", str(pairs[0]))
    words = [
        str(t).lower()
        for t in tree.scan_values(lambda v: isinstance(v, Token))
        if str(t) not in ("NODES", "LABEL")
    ]
    return GroupRef("name", " ".join(words))


def _intent(tree: Any, norm: Normalized) -> Intent:
    from lark import Token, Tree

    pol = next(c for c in tree.children if isinstance(c, Tree))
    kind = pol.data
    subs = [c for c in pol.children if isinstance(c, Tree)]
    groups = [_group(c) for c in subs if c.data == "group"]
    node_trees = [c for c in subs if c.data in ("nodes", "zone_nodes")]
    nodes = _nodes(node_trees[0]) if node_trees else None
    win, soft = norm.window, norm.soft
    if kind == "prio_over":
        return Intent("priority", pods=groups[0], other=groups[1], window=win, soft=soft)
    if kind == "prio_under":
        return Intent("priority", pods=groups[1], other=groups[0], window=win, soft=soft)
    if kind == "prio_first":
        return Intent("priority-first", pods=groups[0], window=win, soft=soft)
    if kind in ("place_on", "prefer_on", "place_off", "place_off_rev"):
        soft = norm.soft or kind == "prefer_on"
        return Intent(
            "placement",
            pods=groups[0],
            nodes=nodes,
            on=kind in ("place_on", "prefer_on"),
            soft=soft,
            window=norm.window,
        )
    if kind in ("spread", "spread_nogroup"):
        if kind == "spread_nogroup":
            raise PolicyRefusedError(
                "",
                "this could mean two things",
                "(a) spread every pod's replicas across the topology (topology spread), "
                "or (b) score nodes LeastAllocated (spread load)",
                "name the pods to spread, or say 'spread load'",
            )
        topo = next(c for c in subs if c.data == "topo")
        skew_t = next((c for c in subs if c.data == "skew"), None)
        skew = int(next(skew_t.scan_values(lambda v: isinstance(v, Token)))) if skew_t else 1
        topology = str(topo.children[0]).lower()
        return Intent("spread", pods=groups[0], topology=topology, skew=skew, window=win, soft=soft)
    if kind == "pack":
        g = groups[0] if groups else None
        return Intent("strategy", pods=g, strategy="MostAllocated", window=win, soft=soft)
    if kind == "spread_load":
        g = groups[0] if groups else None
        return Intent("strategy", pods=g, strategy="LeastAllocated", window=win, soft=soft)
    if kind == "share":
        return Intent("gpu-share", pods=groups[0], milli=norm.amount or 0, window=win, soft=soft)
    if kind == "frag":
        return Intent("gpu-fragmentation", window=win, soft=soft)
    if kind == "weight":
        pname = next(c for c in subs if c.data == "pname")
        words = {"NODES": "node", "SPREAD": "spread", "GPU": "gpu"}
        text = " ".join(words.get(str(t), str(t)) for t in pname.children)
        number = next(t for t in pol.children if isinstance(t, Token) and t.type == "NUMBER")
        return Intent("score-weight", plugin=text, weight=int(number), window=win, soft=soft)
    raise PolicyRefusedError("", f"unknown form {kind}")


def parse_intent(sentence: str, names: frozenset[str], near: NearMiss | None) -> Intent:
    """The one meaning of ``sentence`` (steps 1-2).

    Raises:
        PolicyRefusedError: empty, not parsable (what was understood and what was not), or
            with two different meanings.
    """
    from lark.exceptions import UnexpectedEOF, UnexpectedInput
    from lark.visitors import CollapseAmbiguities

    norm = normalize(sentence, names, near)
    stream = " ".join(norm.tokens)
    if not norm.tokens:
        raise PolicyRefusedError(sentence, "no words that a policy is made of")
    try:
        tree = _parser().parse(stream)
    except UnexpectedInput as e:
        pos = int(getattr(e, "pos_in_stream", None) or 0)
        k = stream[:pos].count(" ") if pos else 0
        if isinstance(e, UnexpectedEOF):
            k = len(norm.tokens)
        raise PolicyRefusedError(
            sentence,
            "the sentence does not fit any policy form (see docs/why.md)",
            " ".join(norm.sources[:k]) + " ..." if k else "",
            " ".join(norm.sources[k:]) or "(the sentence ends before the policy is complete)",
        ) from None
    intents: list[Intent] = []
    for alt in CollapseAmbiguities().transform(tree):
        try:
            it = _intent(alt, norm)
        except PolicyRefusedError as r:
            raise PolicyRefusedError(sentence, r.reason, r.understood, r.not_understood) from None
        if it not in intents:
            intents.append(it)
    if len(intents) > 1:
        raise PolicyRefusedError(
            sentence,
            "this could mean two things",
            " | ".join(i.words() for i in intents[:3]),
            "rephrase so that only one reading is left",
        )
    it = intents[0]
    if norm.amount is not None and it.form != "gpu-share":
        raise PolicyRefusedError(sentence, "an amount that no part of the policy uses", it.words())
    if it.form == "gpu-share" and not 0 < it.milli <= 1000:
        raise PolicyRefusedError(
            sentence, "a GPU share must be 1..1000 milli-GPU (0-100 %)", it.words()
        )
    return it


# ---------------------------------------------------------------------------- names


@dataclass
class ClusterNames:
    """What the cluster's names mean: the vocabulary names are resolved against.

    Attributes:
        objects: the cluster.
        docs: its documents (patches apply to them).
    """

    objects: ClusterObjects
    docs: list[DocRef]

    @cached_property
    def vocabulary(self) -> frozenset[str]:
        """Every name a policy may use (lower-case); computed once."""
        o = self.objects
        out: set[str] = {ns.name for ns in o.namespaces} | {p.namespace for p in o.pods}
        for p in o.pods:
            out |= {str(v).lower() for v in p.labels.values()}
            if p.owner:
                out.add(p.owner.split("/", 1)[-1])
        for n in o.nodes:
            out |= {str(v).lower() for v in n.labels.values()} | {n.name}
        out |= {pc.name for pc in o.priority_classes}
        out |= _plugin_words()
        return frozenset(out)

    def pods(self, ref: GroupRef) -> tuple[str, list[Pod]]:
        """``(description, pods)`` of a pod group.

        Raises:
            PolicyRefusedError: no pod matches, or the name means two different pod sets.
        """
        o = self.objects
        if ref.kind == "label":
            k, _, v = ref.text.partition("=")
            hit = [p for p in o.pods if p.labels.get(k) == v]
            readings = {f"label {k}={v}": hit} if hit else {}
        elif ref.kind == "namespace":
            hit = [p for p in o.pods if p.namespace == ref.text]
            readings = {f"namespace {ref.text}": hit} if hit else {}
        else:
            readings = self._pod_readings(ref.text)
        if not readings:
            raise PolicyRefusedError(
                "",
                f"{ref.text!r} matches no pod in the cluster",
                "",
                f"{ref.text!r} (namespaces: {', '.join(sorted({p.namespace for p in o.pods}))})",
            )
        distinct: dict[tuple[str, ...], str] = {}
        for desc, ps in readings.items():
            distinct.setdefault(tuple(sorted(p.key for p in ps)), desc)
        if len(distinct) > 1:
            raise PolicyRefusedError(
                "",
                f"{ref.text!r} could mean different pods",
                "; ".join(f"{d} ({len(k)} pods)" for k, d in distinct.items()),
                f"say which one, e.g. 'pods labeled k=v' or 'namespace {ref.text}'",
            )
        desc = next(iter(distinct.values()))
        return desc, readings[desc]

    def _pod_readings(self, text: str) -> dict[str, list[Pod]]:
        o = self.objects
        names = [text.replace(" ", "-"), text.replace(" ", "")]
        out: dict[str, list[Pod]] = {}
        for name in names:
            ns = [p for p in o.pods if p.namespace == name]
            if ns:
                out[f"namespace {name}"] = ns
            keys = sorted({k for p in o.pods for k, v in p.labels.items() if v.lower() == name})
            for k in keys:
                out[f"label {k}={name}"] = [
                    p for p in o.pods if p.labels.get(k, "").lower() == name
                ]
            pc = [p for p in o.pods if p.priority_class_name == name]
            if pc:
                out[f"PriorityClass {name}"] = pc
            own = [p for p in o.pods if p.owner.split("/", 1)[-1] == name]
            if own:
                out[f"workload {name}"] = own
            if out:
                return out
        return out

    def nodes(self, ref: GroupRef) -> tuple[str, list[str], tuple[str, str] | None]:
        """``(description, node names, (label key, value) or None)`` of a node group.
        None: the group has no label of its own (``gpu``: nodes with GPUs).

        Raises:
            PolicyRefusedError: no node matches, or the name means two different node sets.
        """
        nodes = self.objects.nodes
        readings: dict[str, tuple[list[str], tuple[str, str] | None]] = {}
        if ref.kind == "label":
            k, _, v = ref.text.partition("=")
            hit = [n.name for n in nodes if n.labels.get(k) == v]
            if hit:
                readings[f"label {k}={v}"] = (hit, (k, v))
        elif ref.kind == "zone":
            words = [w for w in ref.text.split() if w not in ("zones",)]
            value = words[-1] if words else ""
            for k in sorted({k for n in nodes for k in n.labels if "zone" in k}):
                hit = [
                    n.name for n in nodes if n.labels.get(k, "").lower() in (value, f"zone-{value}")
                ]
                if hit:
                    readings[f"label {k}={value}"] = (hit, (k, nodes_value(nodes, k, hit[0])))
        else:
            text = ref.text
            cands = [text.replace(" ", "-"), text.replace(" ", "")]
            for name in cands:
                for k in sorted({k for n in nodes for k in n.labels}):
                    hit = [n.name for n in nodes if n.labels.get(k, "").lower() == name]
                    if hit and k != "kubernetes.io/hostname":
                        readings[f"label {k}={name}"] = (hit, (k, nodes_value(nodes, k, hit[0])))
                if name == "gpu":
                    hit = [n.name for n in nodes if n.allocatable.get(GPU, 0) > 0]
                    if hit:
                        readings["nodes with GPUs"] = (hit, None)
                if readings:
                    break
        if not readings:
            raise PolicyRefusedError(
                "", f"{ref.text!r} matches no node in the cluster", "", repr(ref.text)
            )
        distinct: dict[tuple[str, ...], str] = {}
        for desc, (hit, _) in readings.items():
            distinct.setdefault(tuple(sorted(hit)), desc)
        if len(distinct) > 1:
            raise PolicyRefusedError(
                "",
                f"{ref.text!r} could mean different nodes",
                "; ".join(f"{d} ({len(k)} nodes)" for k, d in distinct.items()),
                "say which one, e.g. 'nodes labeled k=v'",
            )
        # the same set under several labels: prefer a label over "nodes with GPUs"
        for desc, (hit, label) in readings.items():
            if label is not None:
                return desc, hit, label
        desc = next(iter(readings))
        return desc, readings[desc][0], None

    def topology_key(self, topo: str) -> str:
        """The node label key of ``zones``/``nodes``/``regions``/``racks``.

        Raises:
            PolicyRefusedError: no node carries such a key.
        """
        keys = {k for n in self.objects.nodes for k in n.labels}
        order = {
            "zones": ["topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone"],
            "regions": ["topology.kubernetes.io/region"],
            "nodes": ["kubernetes.io/hostname"],
            "racks": [],
        }.get(topo, [])
        for k in order:
            if k in keys:
                return k
        word = {"zones": "zone", "regions": "region", "racks": "rack"}.get(topo, topo)
        hits = sorted(k for k in keys if word in k)
        if len(hits) == 1:
            return hits[0]
        if topo == "nodes":
            return "kubernetes.io/hostname"
        raise PolicyRefusedError(
            "", f"no node label for {topo!r}", "", f"node label keys: {sorted(keys)}"
        )


def nodes_value(nodes: Sequence[Any], key: str, name: str) -> str:
    """The (case-preserved) value of ``key`` on node ``name``."""
    return str(next(n.labels[key] for n in nodes if n.name == name))


# ---------------------------------------------------------------------------- change


@dataclass
class Change:
    """A validated change.

    Attributes:
        intent: what was asked.
        understood: the intent in words, with the groups as resolved.
        created: new objects (PriorityClasses).
        patches: ``Kind namespace/name`` (``Kind name`` for nodes) -> RFC 6902 ops.
        config: the KubeSchedulerConfiguration after the change (None: unchanged).
        conflicts: what the change overwrites in the cluster or the configuration.
        notes: near-miss substitutions and readings.
    """

    intent: Intent
    understood: str
    created: list[dict[str, Any]] = field(default_factory=list)
    patches: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    config: dict[str, Any] | None = None
    conflicts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def canonical(self) -> dict[str, Any]:
        """What the change does, as comparable plain data (exact-match scoring)."""
        return {
            "created": self.created,
            "patches": {k: self.patches[k] for k in sorted(self.patches)},
            "config": self.config,
            "window": list(self.intent.window) if self.intent.window else None,
        }


WINDOW_ANNOTATION = "bosun.dev/policy-window"
NODE_GROUP_LABEL = "bosun.dev/node-group"
DEFAULT_CONFIG: dict[str, Any] = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [{"schedulerName": "default-scheduler"}],
}


def _ident(d: DocRef) -> str:
    if d.kind in ("Node", "PriorityClass", "Namespace"):
        return f"{d.kind} {d.name}"
    return f"{d.kind} {d.namespace}/{d.name}"


class _Compiler:
    def __init__(self, names: ClusterNames, config: Mapping[str, Any] | None) -> None:
        self.names = names
        self.config = copy.deepcopy(dict(config)) if config else None
        self.change: Change | None = None

    def pod_docs(self, pods: Sequence[Pod]) -> list[tuple[DocRef, str]]:
        """The documents that make ``pods`` and the prefix of their pod template."""
        out: list[tuple[DocRef, str]] = []
        seen: set[str] = set()
        docs = self.names.docs
        for p in pods:
            ref = next(
                (
                    d
                    for d in docs
                    if d.kind == "Pod" and d.name == p.name and d.namespace == p.namespace
                ),
                None,
            )
            prefix = ""
            if ref is None and "/" in p.owner:
                kind, name = p.owner.split("/", 1)
                ref = next(
                    (
                        d
                        for d in docs
                        if d.kind == kind and d.name == name and d.namespace == p.namespace
                    ),
                    None,
                )
                prefix = TEMPLATE_PREFIX.get(kind, "")
            if ref is None:
                raise PolicyRefusedError("", f"no document for pod {p.key} to patch")
            if _ident(ref) not in seen:
                seen.add(_ident(ref))
                out.append((ref, prefix))
        return out

    def set_spec(self, ch: Change, pods: Sequence[Pod], path: str, value: Any, what: str) -> None:
        """Set ``spec<path>`` on every pod document; an existing different value is a conflict."""
        for ref, prefix in self.pod_docs(pods):
            spec_ptr = prefix + "/spec"
            old = get_path(ref.doc, spec_ptr + path)
            ops = ch.patches.setdefault(_ident(ref), [])
            if old is not None and old != value:
                ch.conflicts.append(
                    f"{_ident(ref)}: would overwrite {what} {json.dumps(old, sort_keys=True)}"
                )
            if old == value:
                continue
            ops += _ensure(ref.doc, ops, spec_ptr + path, value)

    def annotate(self, ch: Change, pods: Sequence[Pod]) -> None:
        w = ch.intent.window
        if w is None:
            return
        for ref, prefix in self.pod_docs(pods):
            ops = ch.patches.setdefault(_ident(ref), [])
            ops += _ensure(
                ref.doc,
                ops,
                prefix + "/metadata/annotations/" + WINDOW_ANNOTATION.replace("/", "~1"),
                f"{w[0]}-{w[1]}",
            )

    def profile(self) -> dict[str, Any]:
        cfg = self.config if self.config is not None else copy.deepcopy(DEFAULT_CONFIG)
        self.config = cfg
        profiles = cfg.setdefault("profiles", [{"schedulerName": "default-scheduler"}])
        for p in profiles:
            if p.get("schedulerName", "default-scheduler") == "default-scheduler":
                return dict(p) if not isinstance(p, dict) else p
        profiles.insert(0, {"schedulerName": "default-scheduler"})
        prof: dict[str, Any] = profiles[0]
        return prof

    def compile(self, it: Intent) -> Change:
        n = self.names
        ch = Change(it, "")
        if it.form in ("priority", "priority-first"):
            desc, favoured = n.pods(it.pods)  # type: ignore[arg-type]
            keys = {p.key for p in favoured}
            if it.form == "priority":
                odesc, others = n.pods(it.other)  # type: ignore[arg-type]
                if keys & {p.key for p in others}:
                    raise PolicyRefusedError(
                        "", f"{desc} and {odesc} share pods: one cannot outrank itself", it.words()
                    )
            else:
                odesc, others = "every other pod", [p for p in n.objects.pods if p.key not in keys]
            top = max([p.priority for p in others] + [0])
            value = top + 1000
            pc_name = _dns("bosun-" + (it.pods.text if it.pods else "x"))
            existing = {pc.name: pc.value for pc in n.objects.priority_classes}
            if pc_name in existing and existing[pc_name] != value:
                ch.conflicts.append(
                    f"PriorityClass {pc_name}: would overwrite value {existing[pc_name]} "
                    f"with {value}"
                )
            ch.created.append(
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": pc_name},
                    "value": value,
                    "description": f"bosun policy: {desc} over {odesc}",
                }
            )
            self.set_spec(ch, favoured, "/priorityClassName", pc_name, "priorityClassName")
            for ref, prefix in self.pod_docs(favoured):
                if get_path(ref.doc, prefix + "/spec/priority") is not None:
                    ch.patches[_ident(ref)].append(
                        {"op": "remove", "path": prefix + "/spec/priority"}
                    )
            self.annotate(ch, favoured)
            ch.understood = (
                f"{desc} get PriorityClass {pc_name} ({value}) above {odesc} (max {top})"
            )
        elif it.form == "placement":
            desc, pods = n.pods(it.pods)  # type: ignore[arg-type]
            ndesc, node_names, label = n.nodes(it.nodes)  # type: ignore[arg-type]
            if label is None:
                group = _dns(it.nodes.text if it.nodes else "group")
                label = (NODE_GROUP_LABEL, group)
                for d in n.docs:
                    if d.kind == "Node" and d.name in node_names:
                        ops = ch.patches.setdefault(_ident(d), [])
                        ops += _ensure(
                            d.doc,
                            ops,
                            "/metadata/labels/" + NODE_GROUP_LABEL.replace("/", "~1"),
                            group,
                        )
            expr = {"key": label[0], "operator": "In" if it.on else "NotIn", "values": [label[1]]}
            aff: Any
            if it.soft:
                aff = [{"weight": 100, "preference": {"matchExpressions": [expr]}}]
                path = "/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution"
            else:
                aff = {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}
                path = "/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"
            self.set_spec(ch, pods, path, aff, "node affinity")
            self.annotate(ch, pods)
            side = "on" if it.on else "off"
            ch.understood = (
                f"{'prefer to ' if it.soft else ''}keep {desc} ({len(pods)} pods) {side} "
                f"{ndesc} ({len(node_names)} nodes)"
            )
        elif it.form == "spread":
            desc, pods = n.pods(it.pods)  # type: ignore[arg-type]
            key = n.topology_key(it.topology)
            sel = _selector(desc)
            tsc = {
                "maxSkew": it.skew,
                "topologyKey": key,
                "whenUnsatisfiable": "ScheduleAnyway" if it.soft else "DoNotSchedule",
                "labelSelector": sel,
            }
            self.set_spec(
                ch, pods, "/topologySpreadConstraints", [tsc], "topologySpreadConstraints"
            )
            self.annotate(ch, pods)
            ch.understood = f"spread {desc} ({len(pods)} pods) over {key}, maxSkew {it.skew}"
        elif it.form == "strategy" and it.pods is not None:
            desc, pods = n.pods(it.pods)
            name = _dns(f"bosun-{it.pods.text}-{it.strategy}")
            cfg = self.config if self.config is not None else copy.deepcopy(DEFAULT_CONFIG)
            self.config = cfg
            profiles = cfg.setdefault("profiles", [{"schedulerName": "default-scheduler"}])
            new_prof = {
                "schedulerName": name,
                "pluginConfig": [
                    {
                        "name": "NodeResourcesFit",
                        "args": {"scoringStrategy": _strategy(it.strategy)},
                    }
                ],
            }
            old_prof = next((p for p in profiles if p.get("schedulerName") == name), None)
            if old_prof is not None and old_prof != new_prof:
                ch.conflicts.append(f"KubeSchedulerConfiguration: would overwrite profile {name}")
                profiles.remove(old_prof)
            if old_prof != new_prof:
                profiles.append(new_prof)
            self.set_spec(ch, pods, "/schedulerName", name, "schedulerName")
            self.annotate(ch, pods)
            ch.config = self.config
            ch.understood = (
                f"{desc} ({len(pods)} pods) go to a new profile {name}: NodeResourcesFit "
                f"scores {it.strategy}"
            )
        elif it.form == "strategy":
            prof = self.profile()
            pcs = prof.setdefault("pluginConfig", [])
            entry = next((c for c in pcs if c.get("name") == "NodeResourcesFit"), None)
            if entry is None:
                entry = {"name": "NodeResourcesFit", "args": {}}
                pcs.append(entry)
            args = entry.setdefault("args", {})
            old = (args.get("scoringStrategy") or {}).get("type")
            if old and old != it.strategy:
                ch.conflicts.append(
                    f"KubeSchedulerConfiguration profile default-scheduler: would overwrite "
                    f"NodeResourcesFit scoringStrategy {old} with {it.strategy}"
                )
            args["scoringStrategy"] = _strategy(it.strategy)
            ch.config = self.config
            ch.understood = f"NodeResourcesFit scores {it.strategy} in profile default-scheduler"
        elif it.form == "gpu-share":
            desc, pods = n.pods(it.pods)  # type: ignore[arg-type]
            gpu_pods = [p for p in pods if p.gpu_count > 0]
            if not gpu_pods:
                raise PolicyRefusedError(
                    "", f"{desc}: no pod requests a GPU, so none can share one", it.words()
                )
            for ref, prefix in self.pod_docs(gpu_pods):
                containers = get_path(ref.doc, prefix + "/spec/containers") or []
                ops = ch.patches.setdefault(_ident(ref), [])
                for i, c in enumerate(containers):
                    res = c.get("resources") or {}
                    for part in ("requests", "limits"):
                        amounts = res.get(part) or {}
                        if GPU in amounts or GPU_MILLI in amounts:
                            ptr = (
                                f"{prefix}/spec/containers/{i}/resources/{part}/"
                                + GPU_MILLI.replace("/", "~1")
                            )
                            old = amounts.get(GPU_MILLI)
                            if old is not None and int(old) != it.milli:
                                ch.conflicts.append(
                                    f"{_ident(ref)}: would overwrite gpu-milli {old}"
                                )
                            ops += _ensure(ref.doc, ops, ptr, str(it.milli))
            self.annotate(ch, gpu_pods)
            ch.understood = f"{desc}: each GPU pod takes {it.milli} milli-GPU per GPU (shared)"
        elif it.form == "score-weight":
            plugin = score_plugin(it.plugin)
            if not 1 <= it.weight <= 100:
                raise PolicyRefusedError("", "a Score weight must be 1..100", it.words())
            prof = self.profile()
            enabled = (
                prof.setdefault("plugins", {}).setdefault("score", {}).setdefault("enabled", [])
            )
            entry = next((e for e in enabled if e.get("name") == plugin), None)
            if entry is not None and entry.get("weight") not in (None, it.weight):
                ch.conflicts.append(
                    f"KubeSchedulerConfiguration profile default-scheduler: would overwrite "
                    f"{plugin} weight {entry.get('weight')} with {it.weight}"
                )
            if entry is None:
                enabled.append({"name": plugin, "weight": it.weight})
            else:
                entry["weight"] = it.weight
            ch.config = self.config
            ch.understood = (
                f"Score plugin {plugin} gets weight {it.weight} in profile default-scheduler"
            )
        else:
            prof = self.profile()
            plugins = prof.setdefault("plugins", {})
            score = plugins.setdefault("score", {})
            enabled = score.setdefault("enabled", [])
            if not any(e.get("name") == "FGD" for e in enabled):
                enabled.append({"name": "FGD", "weight": 1})
            ch.config = self.config
            ch.understood = (
                "the FGD score plugin (GPU fragmentation) runs in profile default-scheduler"
            )
        if it.window and it.form in ("strategy", "gpu-fragmentation"):
            ch.notes.append(
                f"the configuration change is meant for {it.window[0]}-{it.window[1]}: "
                "bosun does not switch configurations on a clock (see docs/why.md)"
            )
        return ch


@lru_cache(maxsize=1)
def _plugin_words() -> frozenset[str]:
    """Score plugin names, lower-case, whole and split at capitals (``image``,
    ``locality``, ``imagelocality``), so that near-miss matching leaves them alone."""
    out: set[str] = set()
    for name, points in registry_points(in_tree_registry()).items():
        if "score" in points:
            out.add(name.lower())
            out |= {w.lower() for w in re.findall(r"[A-Z][a-z]+|[A-Z]+(?![a-z])", name)}
    return frozenset(out)


def score_plugin(text: str) -> str:
    """The Score plugin a phrase names: its words, joined, are part of exactly one Score
    plugin's name (``image locality`` -> ImageLocality, ``balanced allocation`` ->
    NodeResourcesBalancedAllocation).

    Raises:
        PolicyRefusedError: no Score plugin, or several, match.
    """
    points = registry_points(in_tree_registry())
    scorers = sorted(n for n, p in points.items() if "score" in p)
    key = text.replace(" ", "").replace("-", "").lower()
    hits = [n for n in scorers if key and key in n.lower()]
    exact = [n for n in hits if n.lower() == key]
    if len(exact) == 1:
        return exact[0]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise PolicyRefusedError(
            "",
            f"{text!r} names no Score plugin",
            "",
            f"{text!r} (Score plugins: {', '.join(scorers)})",
        )
    raise PolicyRefusedError(
        "", f"{text!r} could mean several Score plugins", ", ".join(hits), "name one of them"
    )


def _strategy(kind: str) -> dict[str, Any]:
    """NodeResourcesFit's ``scoringStrategy`` of ``kind`` over cpu and memory (weight 1)."""
    return {
        "type": kind,
        "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
    }


def _dns(text: str) -> str:
    out = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return out[:63] or "group"


def _selector(desc: str) -> dict[str, Any]:
    if desc.startswith("label "):
        k, _, v = desc[len("label ") :].partition("=")
        return {"matchLabels": {k: v}}
    return {}


def _ensure(
    doc: Mapping[str, Any], prior: list[dict[str, Any]], ptr: str, value: Any
) -> list[dict[str, Any]]:
    from bosun.explain.patch import ensure_ops

    cur = apply_patch(doc, prior) if prior else doc
    return ensure_ops(cur, ptr, value)


def compile_policy(
    sentence: str,
    names: ClusterNames,
    config: Mapping[str, Any] | None = None,
    *,
    near: NearMiss | None = None,
    overwrite: bool = False,
) -> Change:
    """Turn one sentence into a validated :class:`Change` (steps 1-5).

    Args:
        sentence: the policy.
        names: the cluster.
        config: the current KubeSchedulerConfiguration as a decoded document (None: the
            default one).
        near: the near-miss matcher (None: build one over the keywords and names).
        overwrite: accept a change that overwrites existing settings.

    Raises:
        PolicyRefusedError: not parsable, ambiguous, names nothing, or conflicts (with what
            would be overwritten) while ``overwrite`` is false.
        InputError: the result does not validate (a bug: reported, never written).
    """
    vocab = names.vocabulary
    if near is None:
        near = policy_near_miss(vocab)
    it = parse_intent(sentence, vocab, near)
    try:
        ch = _Compiler(names, config).compile(it)
    except PolicyRefusedError as r:
        understood = r.understood or f"the form: {it.words()}"
        raise PolicyRefusedError(sentence, r.reason, understood, r.not_understood) from None
    ch.notes = normalize(sentence, vocab, near).notes + ch.notes
    if ch.conflicts and not overwrite:
        raise PolicyRefusedError(
            sentence,
            "the policy contradicts the current cluster or configuration",
            ch.understood,
            "; ".join(ch.conflicts) + " (pass --overwrite to replace)",
        )
    validate(ch, names)
    return ch


def policy_near_miss(vocab: frozenset[str]) -> NearMiss:
    """A matcher over the policy keywords and the cluster's names."""
    words = {w for k in LEXICON for w in k.split()} | set(vocab)
    return NearMiss(sorted(w for w in words if len(w) > 2))


def patched_documents(
    ch: Change, names: ClusterNames
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(changed objects, the whole cluster after the change)`` as documents."""
    changed: list[dict[str, Any]] = list(ch.created)
    whole: list[dict[str, Any]] = list(ch.created)
    for d in names.docs:
        ops = ch.patches.get(_ident(d))
        if ops:
            new = apply_patch(d.doc, ops)
            changed.append(new)
            whole.append(new)
        else:
            whole.append(d.doc)
    return changed, whole


def validate(ch: Change, names: ClusterNames) -> None:
    """Read the changed objects back with bosun's manifest loader (with the cluster's
    PriorityClasses and Namespaces) and the configuration with its parser.

    Raises:
        InputError: either does not validate.
    """
    changed, _ = patched_documents(ch, names)
    context = [d.doc for d in names.docs if d.kind in ("PriorityClass", "Namespace")]
    # unchanged objects were valid already: the changed ones are read with the context
    # they refer to (PriorityClasses, Namespaces)
    load_manifest_text(documents_json([*context, *changed]), "<policy result>")
    if ch.config is not None:
        parse_configuration(ch.config, "<policy result>", registry_points(in_tree_registry()))


def diff(ch: Change, names: ClusterNames, config: Mapping[str, Any] | None) -> str:
    """A unified diff of every changed object and of the configuration."""
    out: list[str] = []
    for d in names.docs:
        ops = ch.patches.get(_ident(d))
        if not ops:
            continue
        a = yaml.safe_dump(d.doc, sort_keys=False).splitlines(keepends=True)
        b = yaml.safe_dump(apply_patch(d.doc, ops), sort_keys=False).splitlines(keepends=True)
        out += difflib.unified_diff(a, b, f"{_ident(d)} (before)", f"{_ident(d)} (after)")
    for doc in ch.created:
        b = yaml.safe_dump(doc, sort_keys=False).splitlines(keepends=True)
        out += difflib.unified_diff(
            [], b, "/dev/null", f"{doc['kind']} {doc['metadata']['name']} (new)"
        )
    if ch.config is not None:
        a = yaml.safe_dump(dict(config or DEFAULT_CONFIG), sort_keys=False).splitlines(
            keepends=True
        )
        b = yaml.safe_dump(ch.config, sort_keys=False).splitlines(keepends=True)
        out += difflib.unified_diff(a, b, "KubeSchedulerConfiguration (before)", "(after)")
    return "".join(out)


def load_config_doc(path: Any) -> dict[str, Any]:
    """The decoded KubeSchedulerConfiguration in ``path``, validated.

    Raises:
        InputError: unreadable or invalid.
    """
    from bosun.framework.config import load_configuration

    load_configuration(path, registry_points(in_tree_registry()))
    with open(path, encoding="utf-8") as fh:
        doc = yaml.safe_load(fh)
    if not isinstance(doc, dict):
        raise InputError(
            [InputProblem(str(path), "document", "", "must be a KubeSchedulerConfiguration")]
        )
    return doc
