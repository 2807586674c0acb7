"""Shared fixtures of the monitor tests."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import urllib.request
from pathlib import Path

import pytest
import torch
from monitor_helpers import synthetic_cars

from nitro.envs.soccar import MeshesNotFoundError, find_soccar_meshes
from nitro.monitor import replay as R


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    """One intra-op thread: the tensors are small and the CI machine has two cores (see tests/train)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def cars_replay() -> R.Replay:
    return synthetic_cars()


@pytest.fixture(scope="session")
def meshes_available():
    try:
        return find_soccar_meshes()
    except MeshesNotFoundError as error:
        pytest.skip(str(error))


# RLViser's packet schema ships in the rlviser-py sdist (spec/*.fbs, MIT); the tests fetch that pinned
# file from PyPI once and decode nitro's packets with flatc and the schema.
RLVISER_PY_SDIST = ("https://files.pythonhosted.org/packages/1b/98/393a9d5c33749c50105bfa8ec7f16559d674c9dd2d8a3ac3d"
                    "165e9020995/rlviser_py-0.6.14.tar.gz")
RLVISER_PY_SHA256 = "555ac09f8ce8a36e42104e1899b01c6efaa3988b9c30f2d69ad2cecccb468960"


@pytest.fixture(scope="session")
def rlviser_spec() -> Path:
    """RLViser's published ``spec/`` folder (rlviser-py 0.6.14, the client of RLViser 0.9)."""
    cache = Path(os.environ.get("NITRO_TEST_CACHE", Path.home() / ".cache" / "nitro-tests")) / "rlviser_py-0.6.14"
    spec = cache / "spec"
    if not (spec / "core.fbs").exists():
        try:
            with urllib.request.urlopen(RLVISER_PY_SDIST, timeout=60) as response:
                data = response.read()
        except OSError as error:
            pytest.skip(f"could not download RLViser's schema (rlviser-py 0.6.14 sdist from PyPI): {error}")
        digest = hashlib.sha256(data).hexdigest()
        assert digest == RLVISER_PY_SHA256, f"rlviser-py sdist sha256 {digest}, expected {RLVISER_PY_SHA256}"
        spec.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar.getmembers():
                if member.isfile() and member.name.startswith("rlviser_py-0.6.14/spec/") and member.name.endswith(".fbs"):
                    (spec / Path(member.name).name).write_bytes(tar.extractfile(member).read())
    return spec


@pytest.fixture(scope="session")
def flatc(rlviser_spec, tmp_path_factory):
    """Decode and encode RLViser packets (without the 8-byte header) with flatc and RLViser's schema.

    Debian's flatc 2.0.8 cannot read render.fbs (vectors of unions); then the schema is read without the
    two render messages, which are the union's last members, so every other member keeps its index."""
    exe = shutil.which("flatc")
    if exe is None:
        pytest.skip("flatc is not installed (Debian package flatbuffers-compiler; .ci/run installs it)")
    work = tmp_path_factory.mktemp("flatc")
    schema = rlviser_spec / "core.fbs"
    probe = subprocess.run([exe, "--json", "-o", str(work), str(schema)], capture_output=True, text=True)
    if probe.returncode and "Vectors of unions" in probe.stdout + probe.stderr:
        trimmed = work / "spec"
        trimmed.mkdir()
        for name in ("common.fbs", "game_state.fbs"):
            shutil.copy(rlviser_spec / name, trimmed / name)
        core = (rlviser_spec / "core.fbs").read_text()
        union = re.search(r"union Message \{([^}]*)\}", core).group(1)
        members = [m.strip() for m in union.split(",") if m.strip()]
        assert members[-2:] == ["AddRender", "RemoveRender"], members
        core = core.replace('include "render.fbs";', "").replace(union, "\n    " + ",\n    ".join(members[:-2]) + ",\n")
        (trimmed / "core.fbs").write_text(core)
        schema = trimmed / "core.fbs"
    return FlatC(exe, schema, work)


class FlatC:
    def __init__(self, exe: str, schema: Path, work: Path):
        self.exe, self.schema, self.work, self.count = exe, schema, work, 0

    def decode(self, payload: bytes) -> dict:
        self.count += 1
        binary = self.work / f"packet{self.count}.bin"
        binary.write_bytes(payload)
        subprocess.run([self.exe, "--json", "--strict-json", "--defaults-json", "--raw-binary", "-o", str(self.work),
                        str(self.schema), "--", str(binary)], check=True, capture_output=True)
        return json.loads(binary.with_suffix(".json").read_text())

    def encode(self, message: dict) -> bytes:
        self.count += 1
        path = self.work / f"message{self.count}.json"
        path.write_text(json.dumps(message))
        subprocess.run([self.exe, "--binary", "-o", str(self.work), str(self.schema), str(path)], check=True,
                       capture_output=True)
        return path.with_suffix(".bin").read_bytes()


CHROMIUM_CANDIDATES = ("/usr/lib/chromium/chromium", "chromium", "chromium-browser", "google-chrome")


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium (Debian's package; $NITRO_CHROMIUM names another) driven by Playwright, with
    WebGL on SwiftShader (no GPU needed)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the test extra)")
    exe = os.environ.get("NITRO_CHROMIUM") or next(
        (found for name in CHROMIUM_CANDIDATES if (found := shutil.which(name))), None)
    if exe is None:
        pytest.skip("Chromium is not installed (Debian package chromium; .ci/run installs it)")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=exe, args=["--use-angle=swiftshader",
                                                                "--enable-unsafe-swiftshader"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    """A fresh 1280x720 page; JavaScript errors fail the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page
    context.close()
    assert not errors, f"JavaScript errors: {errors}"
