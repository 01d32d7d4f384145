#pragma once
// Hidden validation shapes drawn for one evaluation (docs/validation.md, "Hidden shapes"): for each
// path of a configuration's launch plan (the steps that run for a shape: a plan with `when`
// dispatches shapes to several), shapes inside that path with a tail in every dimension (values
// that are multiples of as few tile sizes as the input spec allows), then shapes drawn from the
// scalars' values and ranges. Everything follows from one seed, drawn anew for each evaluation
// (random_validation_seed) and recorded with it, so that its shapes can be drawn again.
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "context/context.h"
#include "expr/expr.h"
#include "plan/plan_language.h"

namespace peak {

// A seed no candidate can know: from std::random_device, below 2^53 (exact in JSON readers).
uint64_t random_validation_seed();

// How many of the tile sizes 2..64 divide `v` (0: a tail for every tile).
int tile_multiples(int64_t v);

// `count` hidden shapes (more when the plan has more paths than that): one per path of the plan
// of `config` met among the listed shapes and draws from the scalars' values and ranges (starting
// from the cheapest listed shape of the path where there is one, else the cheapest draw that
// takes it, each dimension moved to a nearby tail that keeps the shape valid and on its path),
// then draws the plan runs that cost no more than the costliest of the context's validation and
// hidden shapes (cost: the context's `flops`, else `bytes`, else the arrays' elements). None
// when no scalar declares values or a range (as sample_shapes). Listed shapes and repeats are
// left out.
std::vector<Shape> hidden_validation_shapes(const KernelContext& ctx, const SourceRegions& source,
                                            const Config& config, const PlanDialect& dialect,
                                            const expr::Env& device, int count, uint64_t seed);

}  // namespace peak
