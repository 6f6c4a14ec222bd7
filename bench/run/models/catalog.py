"""The suite's models, found by listing this package: a model file declares its own facts in a
module-level `DECLARES`, a tuple of literal dicts, read here from the file's text so that the
names and facts are known without importing the model, and with it TensorFlow (the CLI and the
launchers check --model before any worker starts). Each dict:

- `name`: what --model calls it; `class`: the class in that file that builds it;
- `reads`: the inputs it takes, `"images"` or `"ids"` (bench.run.data);
- `imagenet`: True for a model that takes --image-size, with `min_image_size`, the smallest input
  its strides and valid paddings leave room for;
- `mixed_precision`: whether --precision mixed_* can run it: True (the default) for a model whose logits read its
  trainable variables from its attributes (directly, or in their lists and dicts), which are cast where they are
  read (bench.run.models.base.Model.precise_logits); False for one that reads them otherwise.

A file whose declaration is malformed is reported and skipped, as a broken strategy is."""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from bench.run.data import IDS, IMAGES

DECLARATION = "DECLARES"
REQUIRED = ("name", "class", "reads")
OPTIONAL = {"imagenet": False, "min_image_size": None, "mixed_precision": True}


@dataclass(frozen=True)
class Declared:
    name: str
    target: str  # "module:Class"
    reads: str
    imagenet: bool = False
    min_image_size: int | None = None
    mixed_precision: bool = True


def read(path: Path, module: str) -> list[Declared]:
    """The models `path` declares (none where it declares none); ValueError where its declaration
    is not what this module's docstring says."""
    tree = ast.parse(path.read_text(), str(path))
    found = [node.value for node in tree.body if isinstance(node, ast.Assign)
             and any(isinstance(t, ast.Name) and t.id == DECLARATION for t in node.targets)]
    out = []
    for entry in (ast.literal_eval(found[0]) if found else ()):
        missing = [f for f in REQUIRED if f not in entry]
        unknown = sorted(set(entry) - set(REQUIRED) - set(OPTIONAL))
        if missing or unknown:
            raise ValueError(f"lacks {', '.join(missing)}" if missing else f"unknown fields {', '.join(unknown)}")
        if entry["reads"] not in (IMAGES, IDS):
            raise ValueError(f"{entry['name']}: reads must be {IMAGES!r} or {IDS!r}")
        facts = {**OPTIONAL, **entry}
        if facts["imagenet"] and not isinstance(facts["min_image_size"], int):
            raise ValueError(f"{entry['name']}: an ImageNet model declares its min_image_size")
        out.append(Declared(entry["name"], f"{module}:{entry['class']}", entry["reads"], bool(facts["imagenet"]),
                            facts["min_image_size"], bool(facts["mixed_precision"])))
    return out


@cache
def declared() -> dict[str, Declared]:
    """Every declared model by name, in order of name."""
    found: dict[str, Declared] = {}
    for path in sorted(Path(__file__).parent.glob("*.py")):
        try:
            models = read(path, f"{__package__}.{path.stem}")
        except (ValueError, SyntaxError) as exc:
            warnings.warn(f"model file {path.name} skipped: {exc}", stacklevel=1)
            continue
        for model in models:
            found[model.name] = model
    return dict(sorted(found.items()))
