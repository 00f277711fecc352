"""Read a llama.cpp (GGUF) file into the from-scratch code: `hf-attention convert model.gguf DST`.

A GGUF file (llama.cpp's format) holds one model: its config and tokenizer as metadata, and its weights, most of them
quantized (blocks of weights stored as 2- to 8-bit integers with a scale per block). transformers reads such a file
into its own class for the architecture (`from_pretrained(folder, gguf_file=name)`, with the `gguf` package), every
weight dequantized to float32, and `from_hf` converts that model as any other. The checkpoint written holds those
float32 values: its outputs are those of transformers' model of the file, not of the model before llama.cpp quantized
it.

The file is checked before the long load, and each check names it: the `gguf` package, GGUF's magic, a header that
reads whole (a truncated file does not), and an architecture that both transformers' GGUF reader and hf_attention's
converters know (`GGUF_ARCHITECTURES`). The command itself is `convert_checkpoint` in from_hf.py.

This module is not shipped with checkpoints: it may import anything.
"""

import importlib.metadata
import logging
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import transformers
from packaging.version import Version
from transformers import AutoConfig, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from ..architectures import by_model_type

logger = logging.getLogger(__name__)

# The oldest `gguf` that reads a file under NumPy 2: 0.10 and 0.11 call ndarray.newbyteorder, which NumPy 2.0 removed
# (there is no 0.12). pyproject.toml's [train] extra asks for the same.
GGUF_MINIMUM = "0.13"
_INSTALL = f"pip install 'gguf>={GGUF_MINIMUM}' (it comes with hf-attention's [train] extra)"
# The first four bytes of every GGUF file (gguf.GGUF_MAGIC, read little-endian).
GGUF_MAGIC = b"GGUF"

# llama.cpp's name of an architecture (a file's `general.architecture`) → the model type transformers' GGUF reader
# makes of it (modeling_gguf_pytorch_utils.py, integrations/gguf/), for the model types our registry converts.
# tests/test_convert_gguf.py reads a header of each through transformers, and checks that none is missing.
GGUF_ARCHITECTURES = {
    "llama": "llama",  # "mistral" when the file's general.name says Mistral (llama.cpp writes Mistral as llama)
    "mistral": "mistral",  # a name transformers' reader takes too
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "qwen3moe": "qwen3_moe",
    "qwen35": "qwen3_5_text",
    "gpt-oss": "gpt_oss",
    "phi3": "phi3",
    "gemma2": "gemma2",
    "gemma3": "gemma3_text",  # the text model of a Gemma 3 file
    "gpt2": "gpt2",
    "t5": "t5",
}


class GGUFPackageMissing(ImportError, ValueError):
    """The `gguf` package is missing or too old. A ValueError too, so that the `hf-attention` command reports it in one
    line, as it does bad input, rather than with a traceback."""


@dataclass(frozen=True)
class GGUFFile:
    """A GGUF file that passed `check_gguf_file`, and what its header says."""

    path: Path
    architecture: str  # llama.cpp's name for it (general.architecture): "llama"
    quantization: str  # the file's type (general.file_type) in llama.cpp's words: "Q4_1", "F16"; "" if not stated
    tensor_types: dict[str, int]  # how many of its tensors each storage type holds: {"Q4_1": 210, "F32": 61, ...}

    def provenance(self) -> dict:
        """What a converted config records of its source (`converted_from_gguf`)."""
        return {
            "file": self.path.name,
            "architecture": self.architecture,
            "quantization": self.quantization,
            "tensor_types": self.tensor_types,
            "dequantized_to": "float32",
        }


def describe(provenance: dict) -> str:
    """One line for people: 'SmolLM2-135M-Instruct.Q4_1.gguf (llama.cpp Q4_1: 210 tensors Q4_1, 61 F32, 1 Q8_0),
    dequantized to float32' ('read as float32' when no tensor of the file is quantized)."""
    by_count = sorted(provenance["tensor_types"].items(), key=lambda item: -item[1])  # (config.json sorts by name)
    counts = [f"{count} {kind}" for kind, count in by_count]
    counts[0] = counts[0].replace(" ", " tensors ", 1)
    quantization = f" {provenance['quantization']}" if provenance["quantization"] else ""
    read = "read as" if set(provenance["tensor_types"]) <= {"F32", "F16", "BF16"} else "dequantized to"
    return (
        f"{provenance['file']} (llama.cpp{quantization}: {', '.join(counts)}), {read} {provenance['dequantized_to']}"
    )


def is_gguf_path(source: str | os.PathLike) -> bool:
    """Whether `convert` reads `source` as a GGUF file: a name ending in .gguf that is not a folder."""
    name = os.fspath(source)
    return name.lower().endswith(".gguf") and not os.path.isdir(os.path.expanduser(name))


def require_gguf():
    """The `gguf` module, or GGUFPackageMissing saying what to install."""
    try:
        import gguf
    except ImportError:
        raise GGUFPackageMissing(
            f"reading a GGUF file needs the gguf package, which is not installed: {_INSTALL}.", name="gguf"
        ) from None
    try:
        found = importlib.metadata.version("gguf")
    except importlib.metadata.PackageNotFoundError:  # a copy without metadata: nothing to compare
        return gguf
    if Version(found) < Version(GGUF_MINIMUM):
        raise GGUFPackageMissing(
            f"reading a GGUF file needs gguf {GGUF_MINIMUM} or later, and this is gguf {found}: {_INSTALL}.",
            name="gguf",
        )
    return gguf


def check_gguf_file(source: str | os.PathLike, *, argument: str = "source") -> GGUFFile:
    """The GGUF file `source` with what its header says, or a ValueError that names `argument` and the file.

    Raises:
        GGUFPackageMissing: When the `gguf` package is missing or older than GGUF_MINIMUM.
        ValueError: When there is no such file, when it does not start with GGUF's magic (not a GGUF file), when its
            header or tensor table does not read (damaged or truncated), or when its architecture is not one of
            GGUF_ARCHITECTURES (the message names it and lists those).
    """
    name = os.fspath(source)
    path = Path(name).expanduser()
    if not path.is_file():
        raise ValueError(f"{argument}: no such file: {name}")
    with open(path, "rb") as handle:
        head = handle.read(len(GGUF_MAGIC))
    if head != GGUF_MAGIC:
        found = "it is empty" if not head else f"it starts with {head!r}"
        raise ValueError(
            f"{argument} {name} is not a GGUF file: {found}, where every llama.cpp model file starts with "
            f"{GGUF_MAGIC!r}."
        )
    gguf = require_gguf()
    try:
        # Reads the whole header and the table of tensors, each a view into the file: a file cut short fails here.
        reader = gguf.GGUFReader(path)
        architecture = _field(reader, "general.architecture")
    except (ValueError, IndexError, KeyError, OSError) as error:
        raise ValueError(
            f"{argument} {name} is a damaged or truncated GGUF file ({path.stat().st_size:,} bytes): reading it "
            f"stops with {type(error).__name__}: {error}"
        ) from None
    if architecture is None:
        raise ValueError(f"{argument} {name} has no general.architecture: it is not a model file llama.cpp wrote.")
    if architecture not in GGUF_ARCHITECTURES:
        raise ValueError(
            f"{argument} {name} holds a {architecture!r} model (its general.architecture), which hf-attention does "
            "not convert: it converts the GGUF architectures that both transformers' GGUF reader and its own "
            f"converters know, {', '.join(GGUF_ARCHITECTURES)}."
        )
    file_type = _field(reader, "general.file_type")
    try:
        # llama.cpp's names: ALL_F32, MOSTLY_F16, MOSTLY_Q4_1, ...
        quantization = gguf.LlamaFileType(file_type).name.removeprefix("MOSTLY_").removeprefix("ALL_")
    except ValueError:
        quantization = "" if file_type is None else f"file type {file_type}"
    tensor_types = Counter(tensor.tensor_type.name for tensor in reader.tensors)
    return GGUFFile(path, architecture, quantization, dict(tensor_types.most_common()))


def _field(reader, key: str) -> str | int | float | None:
    """A scalar of the file's metadata (a string, or a number), None when absent."""
    field = reader.fields.get(key)
    if field is None:
        return None
    value = field.parts[field.data[0]]
    return bytes(value).decode("utf-8") if field.types[0].name == "STRING" else value[0].item()


def load_gguf(file: GGUFFile) -> PreTrainedModel:
    """transformers' model of `file`: the class our registry picks for its model type, weights in float32.

    Raises:
        ValueError: When transformers cannot read the file's config, or leaves a weight of the model without a value
            from the file (the file lacks it): it would be random, and nothing random is converted.
    """
    folder, name = str(file.path.parent), file.path.name
    try:
        config = AutoConfig.from_pretrained(folder, gguf_file=name)
    except (ValueError, KeyError, OSError) as error:
        raise ValueError(
            f"transformers {transformers.__version__} cannot read the config of {file.path} "
            f"({file.architecture}): {type(error).__name__}: {error}"
        ) from None
    architecture = by_model_type(config.model_type)
    if architecture is None:  # GGUF_ARCHITECTURES lists only model types of the registry; a newer reader may differ
        raise ValueError(
            f"{file.path}: transformers reads it as a {config.model_type!r} model, which is not converted."
        )
    reference_class = architecture.checkpoint_class(" ".join(config.architectures or []))
    model, loading = reference_class.from_pretrained(folder, gguf_file=name, config=config, output_loading_info=True)
    if loading["missing_keys"]:
        missing = sorted(loading["missing_keys"])
        raise ValueError(
            f"{file.path} has no value for {len(missing)} weight(s) of {reference_class.__name__}, the first "
            f"{missing[0]}; converting would keep them random. Nothing was written."
        )
    return model


def gguf_tokenizer(file: GGUFFile) -> PreTrainedTokenizerBase | None:
    """transformers' tokenizer of `file` (rebuilt from its vocabulary, merges and special tokens), or None with a
    warning when it cannot build one."""
    try:
        return AutoTokenizer.from_pretrained(str(file.path.parent), gguf_file=file.path.name)
    except (OSError, ValueError, KeyError, TypeError) as error:
        logger.warning("No tokenizer copied from %s: %s", file.path, error)
        return None
