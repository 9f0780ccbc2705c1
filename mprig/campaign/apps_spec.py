"""Campaign keys of the application workloads (traffic tools `requests` and `cbr`), and which
traffic keys each tool takes.

Kept apart from mprig/campaign/spec.py, which imports these models into `Traffic`. The models only
raise ValueError (from field validators, so an error names the key and its line) and
return (location, message) pairs for the checks that span `Traffic`'s own fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

# Why each bound is where it is: shown with the allowed range in error messages.
_COUNT = "a million requests is hours of traffic per run"
_REQUEST = "16 bytes carry the request's number and the response size; 1 MB is a large upload"
_RESPONSE = "1 GiB per response"
_THINK = "a request a minute; 0 sends the next request as soon as a response ends"
_SIGMA = "the spread of log(size); 5 already spans a factor of 10^4 within one sigma"
_ALPHA = "the Pareto shape; below 0.1 nearly every size hits max_bytes"
_CBR_RATE = "10 Gbit/s is beyond what one Python sender writes"
_FPS = "10000 frames/s: one frame per 100 us is the limit of a sleeping sender"
_FRAME = "16 bytes carry the frame's number and its scheduled send time; 10 MB per frame"
_DEADLINE = (
    "10 s; the receiver reads until duration_s + deadline_ms + 1 s and the traffic is"
    " killed at duration_s + 15 s"
)
FRAME_HEADER = 16  # bytes: frame number and scheduled send time (network order)
REQUEST_HEADER = 16  # bytes: request number and the response size asked for
MAX_BYTES_DEFAULT = 10_000_000  # lognormal and pareto: sizes drawn above are cut to this


class _Model(BaseModel):
    """Same rules as mprig.campaign.spec.StrictModel: unknown keys are errors, immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


Dist = Literal["fixed", "choice", "lognormal", "pareto"]
# The keys each distribution takes (max_bytes caps the two unbounded ones).
DIST_KEYS: dict[str, tuple[str, ...]] = {
    "fixed": ("bytes",),
    "choice": ("sizes", "weights"),
    "lognormal": ("median_bytes", "sigma", "max_bytes"),
    "pareto": ("min_bytes", "alpha", "max_bytes"),
}
REQUIRED_KEYS: dict[str, tuple[str, ...]] = {"fixed": ("bytes",), "choice": ("sizes",)}
REQUIRED_KEYS |= {"lognormal": ("median_bytes",), "pareto": ("min_bytes", "alpha")}
Issue = tuple[tuple[str, ...], str]  # (location below traffic, message)


def _size(default: int | None = None) -> Any:
    return Field(default=default, ge=1, le=1 << 30, description=_RESPONSE)


class ResponseSize(_Model):
    """How the server picks each response's size (drawn by the client from the run's seed,
    so a repetition asks for the same sizes in the same order)."""

    dist: Dist  # fixed, choice (sizes with weights), lognormal or pareto
    bytes: int | None = _size()  # fixed: every response's size
    # choice: the sizes drawn from, bytes
    sizes: tuple[int, ...] | None = Field(default=None, min_length=1, max_length=64)
    # choice: relative weight of each size (default: equal)
    weights: tuple[float, ...] | None = Field(default=None, min_length=1, max_length=64)
    median_bytes: int | None = _size()  # lognormal: median size (e^mu)
    sigma: float = Field(default=1.0, gt=0, le=5, description=_SIGMA)  # lognormal: sigma
    min_bytes: int | None = _size()  # pareto: scale (the smallest size)
    alpha: float | None = Field(default=None, ge=0.1, le=10, description=_ALPHA)  # pareto
    max_bytes: int = _size(MAX_BYTES_DEFAULT)  # lognormal, pareto: larger draws cut to this

    @field_validator(*{k for keys in DIST_KEYS.values() for k in keys})
    @classmethod
    def _for_dist(cls, value: Any, info: ValidationInfo) -> Any:
        dist = info.data.get("dist")
        if value is not None and dist is not None and info.field_name not in DIST_KEYS[dist]:
            takes = ", ".join(DIST_KEYS[dist])
            raise ValueError(f"is not a key of dist {dist} (it takes {takes})")
        return value

    @field_validator("sizes")
    @classmethod
    def _sizes(cls, value: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if value is not None and not all(1 <= v <= 1 << 30 for v in value):
            raise ValueError(f"every size must be >= 1 and <= {1 << 30} bytes ({_RESPONSE})")
        return value

    @field_validator("weights")
    @classmethod
    def _weights(cls, value: tuple[float, ...] | None, info: ValidationInfo) -> Any:
        if value is None:
            return value
        if any(w < 0 for w in value) or not any(value):
            raise ValueError("weights must be >= 0 and not all 0")
        sizes = info.data.get("sizes")
        if sizes is not None and len(sizes) != len(value):
            raise ValueError(f"gives {len(value)} weights for {len(sizes)} sizes")
        return value

    def keys(self) -> dict[str, Any]:
        """`dist` and the keys of this distribution (defaults included) as JSON values."""
        own = ("dist", *DIST_KEYS[self.dist])
        return {k: v for k, v in self.model_dump(mode="json").items() if k in own and v is not None}

    def missing(self) -> list[str]:
        """The keys this distribution needs that the spec left out."""
        return [k for k in REQUIRED_KEYS[self.dist] if getattr(self, k) is None]


class Requests(_Model):
    """Request/response workload: the client asks, the server answers with a response of a
    drawn size; the client logs every request's completion time."""

    count: int = Field(default=100, ge=1, le=1_000_000, description=_COUNT)  # requests
    # bytes of each request (16 carry its number and the size asked for)
    request_bytes: int = Field(default=100, ge=16, le=1_000_000, description=_REQUEST)
    response: ResponseSize  # the response size distribution
    # pause between a response's end and the next request, ms (0: back to back)
    think_ms: float = Field(default=0, ge=0, le=60_000, description=_THINK)
    # persistent: one connection for every request; per_request: a new connection for
    # each (its completion time includes the handshake)
    connection: Literal["persistent", "per_request"] = "persistent"

    @field_validator("response")
    @classmethod
    def _complete(cls, value: ResponseSize) -> ResponseSize:
        if missing := value.missing():
            raise ValueError(f"dist {value.dist} needs {', '.join(missing)}")
        return value


class Cbr(_Model):
    """Constant-bitrate stream: frames of one size at a fixed rate, each with a deadline."""

    rate_mbit: float = Field(gt=0, le=10_000, description=_CBR_RATE)  # stream rate, Mbit/s
    # frames per second (default 50 unless frame_bytes is given); frame size follows
    fps: float | None = Field(default=None, gt=0, le=10_000, description=_FPS)
    # bytes per frame, instead of fps (fps = rate / frame size)
    frame_bytes: int | None = Field(default=None, ge=16, le=10_000_000, description=_FRAME)
    # a frame arriving later than this after its scheduled send time misses its deadline
    deadline_ms: float = Field(default=100, gt=0, le=10_000, description=_DEADLINE)

    @field_validator("frame_bytes")
    @classmethod
    def _one_of(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and info.data.get("fps") is not None:
            raise ValueError("give fps or frame_bytes, not both (one follows from rate_mbit)")
        return value

    def frame_size(self) -> int:
        """Bytes per frame: given, or rate / fps."""
        if self.frame_bytes is not None:
            return self.frame_bytes
        return round(self.rate_mbit * 1e6 / 8 / self.frames_per_s())

    def frames_per_s(self) -> float:
        """Frames per second: given (default 50), or rate / frame size."""
        if self.frame_bytes is not None:
            return self.rate_mbit * 1e6 / 8 / self.frame_bytes
        return self.fps if self.fps is not None else 50.0

    def frames(self, duration_s: float) -> int:
        """Frames scheduled in duration_s (the first at 0)."""
        return max(1, round(duration_s * self.frames_per_s()))

    def issues(self) -> list[Issue]:
        """Rate, fps and frame size that do not fit together."""
        size, fps = self.frame_size(), self.frames_per_s()
        if self.frame_bytes is None and size < FRAME_HEADER:
            return [(("fps",), f"gives {size}-byte frames at {self.rate_mbit:g} Mbit/s; a"
                     f" frame needs >= {FRAME_HEADER} bytes (lower fps)")]  # fmt: skip
        if fps > 10_000:
            return [(("frame_bytes",), f"gives {fps:.0f} frames/s at {self.rate_mbit:g}"
                     " Mbit/s; at most 10000 (larger frames)")]  # fmt: skip
        return []


# The traffic keys each tool owns; another tool given them is an error.
OWN_KEYS: dict[str, tuple[str, ...]] = {
    "bulk": ("bytes",),
    "blocks": ("block_bytes", "interval_ms"),
    "requests": ("requests",),
    "cbr": ("cbr",),
}
APP_TOOLS = ("requests", "cbr")


def tool_issues(tool: str, values: Mapping[str, Any]) -> list[Issue]:
    """(location, message) per traffic key that does not belong to `tool`, and per key the
    workload tools (blocks, requests, cbr) need and lack. `values`: Traffic's fields."""
    if tool == "blocks":
        return _blocks_issues(values)
    issues: list[Issue] = [
        ((k,), f"only tool {owner} {_VERB[owner]} (tool is {tool})")
        for owner, keys in OWN_KEYS.items()
        for k in keys
        if owner not in (tool, "bulk") and values.get(k) is not None
    ]
    if tool in APP_TOOLS:
        issues += _app_issues(tool, values)
    return issues


_VERB = {
    "blocks": "writes blocks",
    "requests": "sends requests",
    "cbr": "streams frames",
}


def _blocks_issues(values: Mapping[str, Any]) -> list[Issue]:
    """Block fields given, and blocks without iperf3's or bulk's (or the app tools')."""
    issues: list[Issue] = [
        ((k,), "tool blocks needs a number here")
        for k in OWN_KEYS["blocks"]
        if values.get(k) is None
    ]
    if values.get("omit_s"):
        issues.append((("omit_s",), "is iperf3's warm-up; tool blocks has none"))
    if values.get("bytes") is not None:
        issues.append((("bytes",), "is bulk's size; tool blocks writes for duration_s"))
    issues += [((k,), f"only tool {k} {_VERB[k]} (tool is blocks)") for k in APP_TOOLS
               if values.get(k) is not None]  # fmt: skip
    return issues


def _app_issues(tool: str, values: Mapping[str, Any]) -> list[Issue]:
    """What tool requests or cbr needs: its own mapping, no omit_s or bytes; requests
    only as a download (the client asks, the server answers)."""
    issues: list[Issue] = []
    if values.get(tool) is None:
        issues.append(((tool,), f"tool {tool} needs a `{tool}:` mapping (docs/campaign.md)"))
    if values.get("omit_s"):
        issues.append((("omit_s",), f"is iperf3's warm-up; tool {tool} has none"))
    if values.get("bytes") is not None:
        issues.append((("bytes",), f"is bulk's size; tool {tool} runs for duration_s"))
    if tool == "requests" and values.get("direction") == "upload":
        issues.append((("direction",), "tool requests is a download: the client asks and"
                       " the server answers (response sizes are what varies)"))  # fmt: skip
    cbr = values.get("cbr")
    if tool == "cbr" and isinstance(cbr, Cbr):
        issues += [(("cbr", *loc), msg) for loc, msg in cbr.issues()]
    return issues
