"""The mixture-of-experts layer whose token dispatch and combine `moe:*` measure: `--moe`'s
keys (a profile's `moe:` mapping), validated once, then handed to the driver and every rank
as the record they route tokens by (`wire.MoeLayer`; sweeper/ops/algorithms/moe.py). Pure:
no Ray, no torch.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sweeper.planning.sizes import INT32_MAX, INT64_MAX, SIZE_LIMIT_BYTES, format_size
from sweeper.wire import MoeLayer

# The MoE routing draws tokens x experts random keys of 8 bytes in the driver, per rank: at
# most 1 GiB of them; a rank's send buffer (tokens x top_k x hidden elements) is a size S.
MOE_KEYS_LIMIT = 2**27
DEFAULT = MoeLayer()


class MoeSpec(BaseModel):
    """A mixture-of-experts layer whose token dispatch and combine `moe:*` measure."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tokens: int = Field(
        DEFAULT.tokens, ge=1, le=INT32_MAX, description="Tokens per rank.", strict=True
    )
    hidden: int = Field(
        DEFAULT.hidden,
        ge=1,
        le=INT32_MAX,
        description="Hidden size: elements per token.",
        strict=True,
    )
    top_k: int = Field(
        DEFAULT.top_k,
        ge=1,
        le=INT32_MAX,
        description="Experts each token is routed to.",
        strict=True,
    )
    experts: int = Field(
        DEFAULT.experts,
        ge=1,
        le=INT32_MAX,
        description="Experts in all; expert e lives on rank e mod n.",
        strict=True,
    )
    zipf: float = Field(
        DEFAULT.zipf,
        ge=0,
        allow_inf_nan=False,
        description="Routing skew: expert e is picked ~ (e+1)^-zipf.",
        strict=True,
    )
    seed: int = Field(
        DEFAULT.seed, ge=0, le=INT64_MAX, description="Seed of the routing.", strict=True
    )

    @model_validator(mode="after")
    def _top_k(self) -> MoeSpec:
        if self.top_k > self.experts:
            raise ValueError(f"top_k {self.top_k} is more than the {self.experts} experts")
        if self.tokens * self.experts > MOE_KEYS_LIMIT:
            raise ValueError(
                f"tokens {self.tokens} x experts {self.experts}: more routing keys than the "
                f"driver draws ({MOE_KEYS_LIMIT}, 8 bytes each)"
            )
        sent_bytes = self.tokens * self.top_k * self.hidden * 8  # the widest dtype's
        if sent_bytes > SIZE_LIMIT_BYTES:
            raise ValueError(
                f"tokens {self.tokens} x top_k {self.top_k} x hidden {self.hidden}: a rank "
                f"would send more than the largest size, {format_size(SIZE_LIMIT_BYTES)}"
            )
        return self

    def layer(self) -> MoeLayer:
        """The layer as the driver and the ranks route it."""
        return MoeLayer(**self.model_dump())
