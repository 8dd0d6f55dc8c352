"""The mixture-of-experts layer whose token dispatch and combine `moe:*` measure: `--moe`'s
keys (a profile's `moe:` mapping), validated once, then handed to the driver and every rank
(sweeper/ops/algorithms/moe.py routes the tokens). Pure: no Ray, no torch.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sweeper.planning.sizes import INT32_MAX, INT64_MAX, SIZE_LIMIT_BYTES, format_size

# The MoE routing draws tokens x experts random keys of 8 bytes in the driver, per rank: at
# most 1 GiB of them; a rank's send buffer (tokens x top_k x hidden elements) is a size S.
MOE_KEYS_LIMIT = 2**27


class MoeSpec(BaseModel):
    """A mixture-of-experts layer whose token dispatch and combine `moe:*` measure."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tokens: int = Field(4096, ge=1, le=INT32_MAX, description="Tokens per rank.")
    hidden: int = Field(4096, ge=1, le=INT32_MAX, description="Hidden size: elements per token.")
    top_k: int = Field(2, ge=1, le=INT32_MAX, description="Experts each token is routed to.")
    experts: int = Field(
        64, ge=1, le=INT32_MAX, description="Experts in all; expert e lives on rank e mod n."
    )
    zipf: float = Field(
        1.0,
        ge=0,
        allow_inf_nan=False,
        description="Routing skew: expert e is picked ~ (e+1)^-zipf.",
    )
    seed: int = Field(0, ge=0, le=INT64_MAX, description="Seed of the routing.")

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
