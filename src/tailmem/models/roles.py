r"""Parameter roles: which part of a transformer each parameter belongs to.

Optimiser recipes (:mod:`tailmem.optim.routing`) are written in roles, not parameter names, so that
one recipe (e.g. ``"muon:v,o,w_in,w_gate,w_out adam:*"``, Paper A's ablation arms) means the same
thing for our GPT and for a Hugging Face GPT-2, LLaMA or BERT model.

Roles: ``q k v o`` (attention projections), ``w_in w_gate w_out`` (feed-forward: up, gate, down),
``embed`` (token/position embeddings), ``head`` (output layer), ``norm`` (every parameter of a
normalisation layer, weight and bias), ``bias`` (biases of every other layer), ``other``. The seven
matrix roles ``q k v o w_in w_gate w_out`` only ever hold parameters with at least two dimensions.

:func:`resolve_roles` picks one source for the whole model, the first that applies:

1. the model defines ``param_roles()`` (our GPT): its answer is used as is, and must name every
   parameter of ``named_parameters()``. A wrapper that does not define it but holds such a module
   (``torch.compile``'s ``_orig_mod``, DDP's ``module``, a task head around our GPT) gets the
   roles of the outermost such submodules for their parameters, with the prefix added, and the
   rules below (with the family detected among the remaining names) for the rest;
2. Hugging Face GPT-2 naming (detected by a ``attn.c_attn.weight`` parameter);
3. LLaMA naming (detected by a ``q_proj.weight`` parameter; also Mistral, Qwen, Gemma, ...);
4. BERT naming (detected by a ``attention.self.query.weight`` parameter);
5. torchtitan / Meta lingua Llama naming (detected by an ``attention.wq.weight`` parameter);
6. generic: only the rules below that do not depend on names of a known family.

Explicit roles come first: ``resolve_roles(model, roles=...)`` takes a mapping
``{pattern: role}`` (each pattern a regular expression matched against the whole parameter name,
first match in mapping order wins, so an exact name is its own pattern; e.g.
``{r"layers\.\d+\.mixer\.in_proj\.weight": "w_in", r".*lm_out\.weight": "head"}``) or a
callable ``(name, parameter) -> role | ParamRole | None``. Parameters it leaves out (no match,
or ``None``) get the built-in roles.

For sources 2-6 every parameter gets the first role whose rule matches:

a. a 0-/1-D parameter of a normalisation layer -> ``norm`` (the module's class name contains
   "Norm", or its attribute name contains "norm" or is ``ln_*`` / ``ln<digits>``);
b. any other 0-/1-D parameter whose name ends in "bias" -> ``bias``;
c. the family's name rules, for parameters with at least two dimensions (a 1-D ``q_proj.weight``
   is never called ``q``), matched on whole dotted segments at the end of the name:

   - GPT-2: ``wte``/``wpe`` -> embed; ``attn.c_attn`` -> fused q+k+v (see below); ``attn.c_proj``
     -> o; ``mlp.c_fc`` -> w_in; ``mlp.c_proj`` -> w_out; ``lm_head``/``score`` -> head.
   - LLaMA: ``embed_tokens`` -> embed; ``q_proj k_proj v_proj o_proj`` -> q k v o; ``up_proj`` ->
     w_in; ``gate_proj`` -> w_gate; ``down_proj`` -> w_out; ``lm_head``/``score`` -> head.
   - BERT: ``embeddings.*_embeddings`` -> embed; ``attention.self.{query,key,value}`` -> q k v;
     ``attention.output.dense`` -> o; ``intermediate.dense`` -> w_in; ``layer.N.output.dense`` ->
     w_out; ``pooler.dense`` -> other; ``cls.predictions.decoder``/``classifier`` -> head.
   - torchtitan / lingua: ``tok_embeddings`` -> embed; ``attention.{wq,wk,wv,wo}`` -> q k v o;
     ``feed_forward.w1`` -> w_gate, ``feed_forward.w3`` -> w_in, ``feed_forward.w2`` -> w_out
     (``w2(silu(w1 x) * w3 x)``); ``output`` -> head.
   - torch's own layers, in any model and decided by the class of the module that owns the
     tensor: ``nn.MultiheadAttention``'s ``in_proj_weight`` -> fused q+k+v (its ``q/k/v_proj_
     weight`` when q, k and v differ in width -> q k v) and ``out_proj`` -> o; the ``linear1`` /
     ``linear2`` of ``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer`` -> w_in /
     w_out (so a model built from ``nn.TransformerEncoder`` needs no ``roles=``).
d. the weight of an embedding module (class name contains "Embedding") -> ``embed``;
e. anything else -> ``other``. Nothing is guessed from shapes: a family member with an unusual
   layer name (e.g. OPT's ``fc1``) shows up as ``other`` in :func:`roles_table` instead of being
   misassigned.

Which tensors are the vocabulary's tables (embedding, LM head), which Muon must not train
(:func:`vocabulary_tables`), is decided by role and by the module that owns the tensor, never by
a coincidence of sizes: ``embed`` and ``head`` are; a matrix role never is; an unrecognised
``other`` matrix is when an embedding module owns it, or when it spans the vocabulary and sits
outside the model's stack of blocks (an output layer beside the blocks, not a feed-forward
matrix inside one whose width happens to equal the vocabulary's).

Weights of a module whose class is named ``Conv1D`` (Hugging Face GPT-2) are stored (in, out), so
they carry the Muon layout hint ``fan_out_dim=1``. GPT-2's ``c_attn`` holds q, k and v side by side
in one tensor: it becomes one fused :class:`ParamRole` ``"q+k+v"`` with ``row_splits`` giving the
three blocks of the output dimension, which Muon orthogonalises separately. Being one tensor, it
can only be given to one optimiser kind.

A bare state dict (weights loaded without their module, e.g. a Hugging Face folder read by
``tailmem.models.hf_loading``) resolves with :func:`resolve_roles_from_names`: the same family
rules, with the few class-name facts (``Conv1D``, norms, embeddings) read from the names.

Tied parameters (e.g. GPT-2's ``lm_head`` sharing ``wte``) appear once, under the name
``named_parameters()`` reports first (the embedding), so they get that name's role.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from torch import nn

from tailmem.errors import ConfigError, describe_exception
from tailmem.mdtable import text_table
from tailmem.models.gpt import MemberEmbedding

ROLES: tuple[str, ...] = (
    "q",
    "k",
    "v",
    "o",
    "w_in",
    "w_gate",
    "w_out",
    "embed",
    "head",
    "norm",
    "bias",
    "other",
)
MATRIX_ROLES: tuple[str, ...] = ("q", "k", "v", "o", "w_in", "w_gate", "w_out")
SCHEMES: tuple[str, ...] = (
    "param_roles",
    "gpt2",
    "llama",
    "bert",
    "torchtitan",
    "torch",
    "generic",
)
FAMILIES = "GPT-2, LLaMA, BERT, torchtitan naming or torch.nn's transformer layers"
"""The model families whose roles resolve without ``roles=``, as an error message names them."""


@dataclass(frozen=True)
class ParamRole:
    """The role of one parameter tensor, plus layout hints for Muon.

    Attributes:
        role: one of :data:`ROLES`; for a fused tensor, its parts joined by "+" (e.g. "q+k+v").
        row_splits: sizes splitting the output dimension into blocks that Muon orthogonalises
            separately (a fused tensor's parts), or None for one block.
        fan_out_dim: which dimension is the output: 0 for torch ``Linear`` (out, in), 1 for
            Hugging Face ``Conv1D`` (in, out).
        parts: for a fused tensor, the matrix roles of its blocks in order; empty otherwise.
    """

    role: str
    row_splits: tuple[int, ...] | None = None
    fan_out_dim: int = 0
    parts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.parts:
            bad = [p for p in self.parts if p not in MATRIX_ROLES]
            if len(self.parts) < 2 or bad:
                raise ValueError(
                    f"a fused ParamRole needs at least two parts from {', '.join(MATRIX_ROLES)}; "
                    f"got {self.parts}"
                )
            if self.role != "+".join(self.parts):
                raise ValueError(
                    f"a fused ParamRole's role must be {'+'.join(self.parts)!r}, got {self.role!r}"
                )
            if self.row_splits is None or len(self.row_splits) != len(self.parts):
                raise ValueError(
                    f"fused ParamRole {self.role!r} needs one row split per part, "
                    f"got row_splits={self.row_splits}"
                )
        elif self.role not in ROLES:
            raise ValueError(f"unknown role {self.role!r}; valid roles: {', '.join(ROLES)}")
        if self.row_splits is not None and (
            not self.row_splits or any(int(s) != s or s <= 0 for s in self.row_splits)
        ):
            raise ValueError(f"row_splits must be positive integers, got {self.row_splits}")
        if self.fan_out_dim not in (0, 1):
            raise ValueError(f"fan_out_dim must be 0 or 1, got {self.fan_out_dim}")

    @property
    def roles(self) -> tuple[str, ...]:
        """The plain roles this tensor carries: its parts if fused, else just its role."""
        return self.parts or (self.role,)

    @classmethod
    def fused(
        cls, parts: tuple[str, ...], row_splits: tuple[int, ...], fan_out_dim: int = 0
    ) -> ParamRole:
        """A tensor holding several matrix roles side by side along its output dimension."""
        return cls("+".join(parts), tuple(row_splits), fan_out_dim, tuple(parts))


def _rules(*pairs: tuple[str, str]) -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(r"(?:^|\.)" + pat + r"$"), role) for pat, role in pairs)


_SCHEME_RULES: dict[str, tuple[tuple[re.Pattern[str], str], ...]] = {
    "gpt2": _rules(
        (r"(?:wte|wpe)\.weight", "embed"),
        (r"attn\.c_attn\.weight", "q+k+v"),
        (r"attn\.c_proj\.weight", "o"),
        (r"mlp\.c_fc\.weight", "w_in"),
        (r"mlp\.c_proj\.weight", "w_out"),
        (r"(?:lm_head|score)\.weight", "head"),
    ),
    "llama": _rules(
        (r"embed_tokens\.weight", "embed"),
        (r"q_proj\.weight", "q"),
        (r"k_proj\.weight", "k"),
        (r"v_proj\.weight", "v"),
        (r"o_proj\.weight", "o"),
        (r"up_proj\.weight", "w_in"),
        (r"gate_proj\.weight", "w_gate"),
        (r"down_proj\.weight", "w_out"),
        (r"(?:lm_head|score)\.weight", "head"),
    ),
    "bert": _rules(
        (r"embeddings\.\w+_embeddings\.weight", "embed"),
        (r"attention\.self\.query\.weight", "q"),
        (r"attention\.self\.key\.weight", "k"),
        (r"attention\.self\.value\.weight", "v"),
        (r"attention\.output\.dense\.weight", "o"),
        (r"intermediate\.dense\.weight", "w_in"),
        (r"layer\.\d+\.output\.dense\.weight", "w_out"),
        (r"pooler\.dense\.weight", "other"),
        (r"(?:cls\.predictions\.decoder|classifier)\.weight", "head"),
    ),
    "torchtitan": _rules(
        (r"tok_embeddings\.weight", "embed"),
        (r"attention\.wq\.weight", "q"),
        (r"attention\.wk\.weight", "k"),
        (r"attention\.wv\.weight", "v"),
        (r"attention\.wo\.weight", "o"),
        (r"feed_forward\.w1\.weight", "w_gate"),
        (r"feed_forward\.w3\.weight", "w_in"),
        (r"feed_forward\.w2\.weight", "w_out"),
        (r"output\.weight", "head"),
    ),
    "generic": (),
}
_SENTINELS: dict[str, re.Pattern[str]] = {
    "gpt2": re.compile(r"(?:^|\.)attn\.c_attn\.weight$"),
    "llama": re.compile(r"(?:^|\.)q_proj\.weight$"),
    "bert": re.compile(r"(?:^|\.)attention\.self\.query\.weight$"),
    "torchtitan": re.compile(r"(?:^|\.)attention\.wq\.weight$"),
}
RoleSpec = Mapping[str, ParamRole | str] | Callable[[str, nn.Parameter], ParamRole | str | None]
"""Explicit roles: ``{name pattern: role}`` or ``(name, parameter) -> role or None``."""
_NORM_ATTR = re.compile(r"ln(?:_\w+|\d*)")


def naming_scheme(model: nn.Module) -> str:
    """Which role source :func:`resolve_roles` uses for ``model`` (one of :data:`SCHEMES`)."""
    if _role_owners(model):
        return "param_roles"
    family = _family([name for name, _ in model.named_parameters()])
    torch_layers = (nn.MultiheadAttention, *_TORCH_LAYERS)
    if family == "generic" and any(isinstance(m, torch_layers) for m in model.modules()):
        return "torch"
    return family


def resolve_roles(model: nn.Module, roles: RoleSpec | None = None) -> dict[str, ParamRole]:
    """Map every name of ``model.named_parameters()`` to its :class:`ParamRole`, in that order.

    ``roles`` (a pattern mapping or a callable, see the module docstring) is consulted first;
    the parameters it leaves out get the built-in sources and rules. Raises ValueError for a bad
    pattern or role in ``roles``, and when a model's own ``param_roles()`` is incomplete or
    inconsistent (a bug in the model class, not bad user input); a
    :class:`~tailmem.errors.ConfigError` (a ValueError) when a ``roles`` callable raises.
    """
    params = dict(model.named_parameters())
    explicit = _explicit_roles(params, roles) if roles is not None else {}
    if len(explicit) < len(params):
        explicit = _built_in_roles(model, params) | explicit
    return {name: explicit[name] for name in params}


def _explicit_roles(params: dict[str, nn.Parameter], roles: RoleSpec) -> dict[str, ParamRole]:
    """The roles ``roles`` gives, per parameter name (names it leaves out are absent)."""
    if callable(roles):
        chosen = {name: _call_roles(roles, name, p) for name, p in params.items()}
    elif isinstance(roles, Mapping):
        patterns = []
        for pattern, role in roles.items():
            try:
                patterns.append((re.compile(pattern), role))
            except (re.error, TypeError) as err:
                raise ValueError(
                    f"roles pattern {pattern!r} is not a regular expression ({err}); "
                    f"e.g. r'layers\\.\\d+\\.attn\\.wq\\.weight'"
                ) from None
        chosen = {
            name: next((role for rx, role in patterns if rx.fullmatch(name)), None)
            for name in params
        }
    else:
        raise ValueError(
            f"roles must be a mapping of name pattern -> role or a callable (name, param) -> "
            f"role, got {type(roles).__name__}"
        )
    resolved = {}
    for name, given in chosen.items():
        if given is None:
            continue
        try:
            resolved[name] = given if isinstance(given, ParamRole) else ParamRole(given)
        except (ValueError, TypeError) as err:
            raise ValueError(f"roles gives parameter {name!r} a bad role: {err}") from None
        _check_layout(name, tuple(params[name].shape), resolved[name])
    return resolved


def _call_roles(
    roles: Callable[[str, nn.Parameter], ParamRole | str | None], name: str, p: nn.Parameter
) -> ParamRole | str | None:
    """``roles(name, p)``; what the user's callable raises is one line naming it and ``name``
    (the exception chained)."""
    try:
        return roles(name, p)
    except (Exception, SystemExit) as exc:  # the user's code, not ours
        label = getattr(roles, "__qualname__", None) or type(roles).__qualname__
        module = getattr(roles, "__module__", None) or type(roles).__module__
        raise ConfigError(
            f"roles callable {module}.{label} raised {describe_exception(exc)} for parameter "
            f"{name!r}; expected it to return a role, a ParamRole or None for every parameter"
        ) from exc


def vocab_size(model: nn.Module) -> int | None:
    """Rows of the largest embedding table of ``model`` (its token vocabulary), or None: an
    ``nn.Embedding`` or an ensemble's :class:`~tailmem.models.gpt.MemberEmbedding`."""
    tables = (nn.Embedding, MemberEmbedding)
    sizes = [m.num_embeddings for m in model.modules() if isinstance(m, tables)]
    return max(sizes) if sizes else None


def _built_in_roles(model: nn.Module, params: dict[str, nn.Parameter]) -> dict[str, ParamRole]:
    """Sources 1-6 of the module docstring for every parameter."""
    resolved: dict[str, ParamRole] = {}
    for prefix, module in _role_owners(model):
        dot = prefix + "." if prefix else ""
        own = _from_param_roles(module, dict(module.named_parameters()))
        resolved |= {dot + name: pr for name, pr in own.items() if dot + name in params}
    rest = [name for name in params if name not in resolved]
    family = _family(rest)
    resolved |= {name: _rule_role(model, name, params[name], family) for name in rest}
    for name, pr in resolved.items():
        _check_layout(name, tuple(params[name].shape), pr)
    return resolved


def _role_owners(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The outermost modules (with their prefixes) that define ``param_roles()``."""
    owners: list[tuple[str, nn.Module]] = []
    for prefix, module in model.named_modules():
        if any(p == "" or prefix == p or prefix.startswith(p + ".") for p, _ in owners):
            continue
        method = getattr(module, "param_roles", None)
        # a wrapper that forwards attribute access (torch.compile) lends its inner module's method
        if callable(method) and getattr(method, "__self__", module) is module:
            owners.append((prefix, module))
    return owners


def _family(names: Sequence[str]) -> str:
    for scheme, sentinel in _SENTINELS.items():
        if any(sentinel.search(name) for name in names):
            return scheme
    return "generic"


def matrix_roles_by_name(names: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The matrix roles that the family's name rules (rule c) give each of ``names``, whatever
    its shape: ``("q", "k", "v")`` for GPT-2's fused ``attn.c_attn.weight``, ``("q",)`` for a
    LLaMA ``q_proj.weight``; names no rule calls a matrix are left out.

    :func:`resolve_roles_from_names` gives a name its rule's role only where the shape fits (a
    1-D ``q_proj.weight`` is ``other``, as is a ``c_attn`` whose width does not split in three);
    comparing the two tells which matrices a state dict names but cannot hold as matrices, so
    ``tailmem diagnose`` can say it skipped them.
    """
    rules = _SCHEME_RULES[_family(names)]
    found = {}
    for name in names:
        role = next((role for pattern, role in rules if pattern.search(name)), None)
        parts = tuple(role.split("+")) if role is not None else ()
        if parts and set(parts) <= set(MATRIX_ROLES):
            found[name] = parts
    return found


def _from_param_roles(model: nn.Module, params: dict[str, nn.Parameter]) -> dict[str, ParamRole]:
    method = getattr(model, "param_roles", None)  # there: model is one of _role_owners
    declared: object = method() if callable(method) else None
    if not isinstance(declared, Mapping):
        raise ValueError(
            f"{type(model).__name__}.param_roles() must return a mapping of parameter name to "
            f"role, got {type(declared).__name__}"
        )
    owner = type(model).__name__
    missing = [name for name in params if name not in declared]
    if missing:
        raise ValueError(f"{owner}.param_roles() gives no role for: {_short_list(missing)}")
    aliases = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    unknown = [name for name in declared if name not in aliases]
    if unknown:
        raise ValueError(f"{owner}.param_roles() names unknown parameters: {_short_list(unknown)}")
    resolved = {}
    for name in params:
        value = declared[name]
        try:
            resolved[name] = value if isinstance(value, ParamRole) else ParamRole(value)
        except ValueError as err:
            raise ValueError(f"{owner}.param_roles()[{name!r}]: {err}") from None
    return resolved


def _rule_role(model: nn.Module, name: str, p: nn.Parameter, scheme: str) -> ParamRole:
    module_path = name.rpartition(".")[0]
    module = model.get_submodule(module_path) if module_path else model
    torch_role = _torch_layer_role(model, name, tuple(p.shape)) if p.ndim >= 2 else None
    return torch_role or _role_by_rules(name, tuple(p.shape), scheme, type(module).__name__)


_TORCH_LAYERS = (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)
_TORCH_ATTENTION_ROLES = {"q_proj_weight": "q", "k_proj_weight": "k", "v_proj_weight": "v"}
_TORCH_FFN_ROLES = {"linear1": "w_in", "linear2": "w_out"}


def _torch_layer_role(model: nn.Module, name: str, shape: tuple[int, ...]) -> ParamRole | None:
    """The role of a matrix of torch's own transformer layers (rule c), by the class of the
    module that owns it and of that module's parent; None for any other tensor."""
    module_path, _, attr = name.rpartition(".")
    owner = model.get_submodule(module_path) if module_path else model
    if isinstance(owner, nn.MultiheadAttention):
        width = owner.embed_dim
        if attr == "in_proj_weight" and shape[0] == 3 * width:
            return ParamRole.fused(("q", "k", "v"), (width, width, width))
        role = _TORCH_ATTENTION_ROLES.get(attr)
        return ParamRole(role) if role else None
    if not module_path or attr != "weight":
        return None
    parent_path, _, child = module_path.rpartition(".")
    parent = model.get_submodule(parent_path)
    if isinstance(parent, nn.MultiheadAttention) and child == "out_proj":
        return ParamRole("o")
    role = _TORCH_FFN_ROLES.get(child) if isinstance(parent, _TORCH_LAYERS) else None
    return ParamRole(role) if role else None


def vocabulary_tables(
    model: nn.Module, resolved: Mapping[str, ParamRole], member_dims: int = 0
) -> list[str]:
    """The names of ``resolved`` (roles of ``model``'s parameters) that are the vocabulary's
    tables, an embedding or an LM head: what Muon must not train.

    Decided by role and by the module that owns the tensor, not by shape alone (module
    docstring): ``embed`` and ``head`` are; matrix roles, ``norm`` and ``bias`` are not; an
    ``other`` tensor is when an embedding module owns it, or when one of its sizes (after
    ``member_dims`` leading ensemble dimensions) is the vocabulary's (:func:`vocab_size`) and it
    is not inside a block of the model's layer stack (:func:`in_layer_stack`).
    """
    vocab = vocab_size(model)
    params = dict(model.named_parameters())
    found = []
    for name, pr in resolved.items():
        if pr.role in ("embed", "head"):
            found.append(name)
        elif pr.role == "other":
            owner = model.get_submodule(name.rpartition(".")[0])
            sizes = tuple(params[name].shape)[member_dims:]
            spans = vocab is not None and vocab in sizes and not in_layer_stack(model, name)
            if "Embedding" in type(owner).__name__ or spans:
                found.append(name)
    return found


def in_layer_stack(model: nn.Module, name: str) -> bool:
    """Whether parameter ``name`` sits inside a block of a stack of layers: a module with
    sub-modules held by an ``nn.ModuleList`` or ``nn.ModuleDict`` (a transformer's blocks), or
    by an ``nn.Sequential`` beside another module of its class. A layer that is itself an
    element (a list of output heads, a flat ``nn.Sequential`` model) is not in a block."""
    parts = name.split(".")[:-1]
    module = model
    for part in parts:
        child = module.get_submodule(part)
        has_children = next(child.children(), None) is not None
        repeated = sum(type(m) is type(child) for m in module.children()) > 1
        stack = isinstance(module, (nn.ModuleList, nn.ModuleDict)) or (
            isinstance(module, nn.Sequential) and repeated
        )
        if stack and has_children:
            return True
        module = child
    return False


def _role_by_rules(name: str, shape: tuple[int, ...], scheme: str, cls_name: str) -> ParamRole:
    """Rules a-e of the module docstring for one parameter, given its owner's class name."""
    module_path, _, attr = name.rpartition(".")
    module_attr = module_path.rpartition(".")[2]
    ndim = len(shape)
    fan_out_dim = 1 if cls_name == "Conv1D" and ndim == 2 else 0
    if ndim <= 1:
        is_norm_attr = "norm" in module_attr.lower() or _NORM_ATTR.fullmatch(module_attr)
        if "norm" in cls_name.lower() or is_norm_attr:
            return ParamRole("norm")
        if attr.endswith("bias"):
            return ParamRole("bias")
        return ParamRole("other")
    for pattern, role in _SCHEME_RULES[scheme]:
        if pattern.search(name):
            if "+" in role:
                parts = tuple(role.split("+"))
                width, rest = divmod(shape[fan_out_dim], len(parts))
                if rest or width == 0:
                    return ParamRole("other", fan_out_dim=fan_out_dim)
                return ParamRole.fused(parts, (width,) * len(parts), fan_out_dim)
            return ParamRole(role, fan_out_dim=fan_out_dim)
    if attr == "weight" and "Embedding" in cls_name:
        return ParamRole("embed")
    return ParamRole("other", fan_out_dim=fan_out_dim)


# Hugging Face GPT-2 stores these projections in ``Conv1D`` modules, weight (in, out).
_GPT2_CONV1D = re.compile(r"(?:^|\.)(?:attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight$")


def resolve_roles_from_names(shapes: Mapping[str, Sequence[int]]) -> dict[str, ParamRole]:
    """Roles of a bare state dict (``name -> shape``), for weights loaded without their module.

    Applies the family rules of :func:`resolve_roles` (sources 2-6 and rules a-e) to the names.
    Without the modules, class names are not known: a normalisation layer is recognised by its
    attribute name only (``LayerNorm``, ``ln_1``, ``input_layernorm``, ...), an embedding by the
    family's embedding names, and the GPT-2 ``Conv1D`` layout (``fan_out_dim=1``) by the GPT-2
    names ``attn.c_attn``, ``attn.c_proj``, ``mlp.c_fc``, ``mlp.c_proj``. Our GPT's names belong
    to no family (its roles come from ``GPT.param_roles()``); they resolve as ``other`` here.
    """
    names = list(shapes)
    family = _family(names)
    resolved = {}
    for name in names:
        shape = tuple(int(n) for n in shapes[name])
        conv1d = family == "gpt2" and len(shape) == 2 and _GPT2_CONV1D.search(name)
        resolved[name] = _role_by_rules(name, shape, family, "Conv1D" if conv1d else "")
        _check_layout(name, shape, resolved[name])
    return resolved


def _check_layout(name: str, shape: tuple[int, ...], pr: ParamRole) -> None:
    if len(shape) < 2 and (set(pr.roles) & set(MATRIX_ROLES)):
        raise ValueError(
            f"parameter {name!r} of shape {shape} has matrix role {pr.role!r}; matrix roles "
            f"({', '.join(MATRIX_ROLES)}) need at least 2 dimensions"
        )
    if pr.row_splits is not None:
        size = shape[pr.fan_out_dim] if len(shape) > pr.fan_out_dim else 0
        if sum(pr.row_splits) != size:
            raise ValueError(
                f"parameter {name!r} of shape {shape}: row_splits {pr.row_splits} sum to "
                f"{sum(pr.row_splits)}, not to its output size {size} (fan_out_dim="
                f"{pr.fan_out_dim})"
            )


def _short_list(items: list[str], limit: int = 6) -> str:
    """``a, b, c (+N more)``: one readable line however many items there are."""
    shown = ", ".join(items[:limit])
    return shown + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def roles_table(model: nn.Module) -> str:
    """A printable table of every parameter's name, shape, role and Muon layout hints.

    The first line names the role source (:func:`naming_scheme`), so a model that fell back to the
    generic rules is visible at a glance.
    """
    params = dict(model.named_parameters())
    rows = []
    for name, pr in resolve_roles(model).items():
        hints = []
        if pr.fan_out_dim:
            hints.append(f"fan_out_dim={pr.fan_out_dim}")
        if pr.row_splits is not None:
            hints.append(f"row_splits={pr.row_splits}")
        rows.append((name, tuple(params[name].shape), pr.role, " ".join(hints)))
    header = f"roles from: {naming_scheme(model)}\n"
    return header + text_table(("parameter", "shape", "role", "hints"), rows)
