// Activation checkpointing of one decoder layer.
//
// Forward runs the layer without autograd and keeps only its input (plus the shared rotary tables
// and mask, which exist once per forward anyway); backward recomputes the layer with autograd and
// differentiates it. The model has no dropout or other randomness, so the recomputation is the
// same function and the gradients equal the plain ones.
#ifndef VRAMLAB_WORKER_MODEL_CHECKPOINT_H_
#define VRAMLAB_WORKER_MODEL_CHECKPOINT_H_

#include <torch/torch.h>

#include "worker/model/qwen2_layers.h"

namespace vramlab::worker {

// Runs `layer` on `hidden` as a checkpointed segment. The layer must outlive the autograd graph
// (it is a submodule of the model that runs backward). Without grad mode it is a plain call.
torch::Tensor CheckpointedLayerForward(Qwen2DecoderLayerImpl& layer, const torch::Tensor& hidden,
                                       const DecoderInputs& in);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MODEL_CHECKPOINT_H_
