// AnswersDiffer: whether a shadow version's answer differs from the stable
// version's for the same query (rollout/rollout.h, shadow mode). Outputs
// are matched by name. A floating-point output shaped [batch, classes]
// (classes > 1) differs when any row's top class differs: a classifier's
// answer is its top class, and logits of two versions never match bit for
// bit. Other floating-point outputs differ beyond a relative tolerance;
// other types differ in any byte. An output one side lacks, or a shape or
// type that differs, is a difference too.
#pragma once

#include <vector>

#include "common/tensor.h"

namespace somm {

bool AnswersDiffer(const std::vector<Tensor>& stable, const std::vector<Tensor>& shadow,
                   double relative_tolerance = 1e-3);

}  // namespace somm
