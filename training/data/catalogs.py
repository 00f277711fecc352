"""Gettext catalogs from PyPI wheels: more parallel UI strings than the machine ships, read without installing.

Many desktop applications on PyPI carry their compiled translations (`…/<lang>/LC_MESSAGES/<domain>.mo`) inside the
wheel. `package_catalogs("gramps==6.0.8", "de")` fetches that one wheel into a cache with pip's own downloader
(`pip download --no-deps --only-binary=:all:`: no dependency is pulled, nothing is installed, no code of the package
runs) and reads the catalogs straight out of the zip file with `gettext`, as the machine's catalogs are read. A
package must be pinned (`name==version`) so that every run, on every machine, reads the same strings; the wheel's
licence comes from its own metadata and goes into the model card.

Downloads happen once per machine (the cache is `$HF_ATTENTION_CACHE/wheels`, default `~/.cache/hf-attention`); the
only network they use is the package registry pip is configured for.
"""

from __future__ import annotations

import email.parser
import gettext
import io
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([A-Za-z0-9.+!_-]+)\s*$")


def cache_dir() -> Path:
    """Where fetched wheels are kept: `$HF_ATTENTION_CACHE/wheels`, default `~/.cache/hf-attention/wheels`."""
    root = os.environ.get("HF_ATTENTION_CACHE") or Path.home() / ".cache" / "hf-attention"
    return Path(root) / "wheels"


@dataclass(frozen=True)
class PackageCatalogs:
    """The catalogs of one language in one wheel."""

    requirement: str  # "gramps==6.0.8"
    licence: str  # from the wheel's METADATA
    catalogs: tuple[str, ...]  # the .mo members read
    pairs: tuple[tuple[str, str], ...]  # raw (msgid, msgstr), catalogs in sorted order


def parse_pin(requirement: str) -> tuple[str, str]:
    """("name", "version") of a pinned requirement "name==version", or a ValueError that says why it must be pinned."""
    match = _PIN.match(requirement) if isinstance(requirement, str) else None
    if match is None:
        raise ValueError(
            f"Catalog package {requirement!r} must be pinned as 'name==version' (e.g. 'gramps==6.0.8'), so that every "
            "run reads the same strings."
        )
    name, version = match.group(1), match.group(2)
    try:
        Version(version)
    except InvalidVersion as error:
        raise ValueError(
            f"Catalog package {requirement!r}: {version!r} is not a version (PEP 440, e.g. '6.0.8' or '4.5.post3')."
        ) from error
    return name, version


def fetch_wheel(requirement: str, *, directory: Path | None = None) -> Path:
    """The wheel of the pinned `requirement`, from the cache or downloaded into it by pip.

    Raises:
        ValueError: If the requirement is not pinned.
        RuntimeError: If pip cannot fetch a wheel (no network, no such version, no wheel), with pip's last words.
    """
    name, version = parse_pin(requirement)
    directory = directory or cache_dir()
    cached = _cached_wheel(directory, name, version)
    if cached is not None:
        return cached
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory) as scratch:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet"]
        command += ["--disable-pip-version-check", "--dest", scratch, f"{name}=={version}"]
        done = subprocess.run(command, capture_output=True, text=True)
        wheels = sorted(Path(scratch).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            said = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise RuntimeError(
                f"Could not fetch the wheel of {requirement!r} from the package registry (pip download exited with "
                f"{done.returncode}: {' / '.join(said) or 'no wheel'}). Run once with network access to fill the "
                f"cache {directory}, or remove the package from catalog_packages / heldout_catalog_packages."
            )
        target = directory / wheels[0].name
        os.replace(wheels[0], target)  # atomic: a cache never holds half a wheel
    return target


def _cached_wheel(directory: Path, name: str, version: str) -> Path | None:
    """The cached wheel of `name` at `version`, compared as PEP 440 names and versions: a pin "4.17" or "4.17.0.0"
    is the wheel "4.17.0" (pip would fetch that same file), so an equivalent spelling still finds it offline."""
    if not directory.is_dir():
        return None
    wanted = (canonicalize_name(name), Version(version))
    for path in sorted(directory.glob("*.whl")):
        if _wheel_name_and_version(path) == wanted:
            return path
    return None


def _wheel_name_and_version(path: Path) -> tuple[str, Version] | None:
    """(canonical name, version) of a wheel file name "name-version-...whl"; None for a name that is not one."""
    parts = path.name.split("-")
    if len(parts) < 2:
        return None
    try:
        return canonicalize_name(parts[0]), Version(parts[1])
    except InvalidVersion:
        return None


def catalog_members(names: list[str], lang: str) -> list[str]:
    """The `.mo` members of a wheel for `lang`: `…/<lang>/LC_MESSAGES/*.mo`, and the main regional variant
    `<lang>_<LANG>` (de_DE, fr_FR) that some packages use instead; sorted."""
    pattern = re.compile(
        rf"(^|/)({re.escape(lang)}|{re.escape(lang)}_{re.escape(lang.upper())})/LC_MESSAGES/[^/]+\.mo$"
    )
    return sorted(name for name in names if pattern.search(name))


def wheel_licence(archive: zipfile.ZipFile) -> str:
    """The licence a wheel declares: License-Expression, else a one-line License field, else its classifiers."""
    metadata = next((n for n in archive.namelist() if n.endswith(".dist-info/METADATA")), None)
    if metadata is None:
        return "unknown"
    fields = email.parser.Parser().parsestr(archive.read(metadata).decode("utf-8", "replace"), headersonly=True)
    expression = (fields.get("License-Expression") or "").strip()
    if expression:
        return expression
    licence = (fields.get("License") or "").strip()
    if licence and "\n" not in licence and len(licence) <= 60:
        return licence
    classifiers = [c.split("::")[-1].strip() for c in fields.get_all("Classifier") or [] if c.startswith("License ::")]
    return ", ".join(classifiers) or "unknown"


def package_catalogs(requirement: str, lang: str, *, directory: Path | None = None) -> PackageCatalogs:
    """The `lang` catalogs of the pinned package `requirement` (fetched once; see the module docstring).

    Raises:
        ValueError: If the requirement is not pinned, or its wheel holds no catalog for `lang`.
        RuntimeError: If the wheel cannot be fetched.
    """
    wheel = fetch_wheel(requirement, directory=directory)
    with zipfile.ZipFile(wheel) as archive:
        members = catalog_members(archive.namelist(), lang)
        if not members:
            raise ValueError(
                f"The wheel {wheel.name} of {requirement!r} holds no gettext catalog for language {lang!r} "
                f"(no …/{lang}/LC_MESSAGES/*.mo); remove it from the catalog packages."
            )
        pairs = [pair for member in members for pair in parse_catalog(archive.read(member))]
        return PackageCatalogs(requirement, wheel_licence(archive), tuple(members), tuple(pairs))


def parse_catalog(data: bytes) -> list[tuple[str, str]]:
    """The (msgid, msgstr) pairs of a compiled gettext catalog (the bytes of a `.mo` file).

    Plural entries are stored under (msgid, n) keys; only form 0 is kept, paired with the singular msgid, because
    form 0 is the singular (or the only form) in the languages we use. The header entry (msgid "") is skipped.

    Returns:
        The pairs in catalog order; an empty list if the catalog cannot be decoded (a few old catalogs declare a
        wrong charset), so that one bad file does not stop a corpus from building.
    """
    try:
        catalog = gettext.GNUTranslations(io.BytesIO(data))._catalog
    except (OSError, UnicodeDecodeError, LookupError, ValueError):
        return []
    pairs = []
    for key, value in catalog.items():
        if isinstance(key, tuple):
            key, form = key
            if form != 0:
                continue
        if key:
            pairs.append((key, value))
    return pairs
