# JaxPP hand-off for gpt3-1.3b on 8 GPUs: pp 2, tp 2, dp 2, v 2, 16 microbatches of 1, Interleaved1F1B
# API checked against NVIDIA/jaxpp src/jaxpp/api.py at commit 01dfbd9c.
from functools import partial

import jax
import numpy as np
import optax

import jaxpp.api as jaxpp

PP, DP, TP = 2, 2, 2  # mesh shape: 8 devices
NUM_STAGES = 4  # 2 per pipeline rank
NUM_MICROBATCHES = 16  # leading axis of the batch given to treduce
MICROBATCH_SIZE = 1 * DP  # sequences per microbatch (global)
# First model layer of each stage (layers in model order: embedding, blocks, head):
STAGE_FIRST_LAYER = [0, 6, 13, 20]

mpmd_mesh = jaxpp.MpmdMesh(
    jax.sharding.Mesh(np.array(jax.devices()).reshape((PP, DP, TP)), ("stages", "data", "model")),
    "stages",
)
schedule = jaxpp.Interleaved1F1B(num_stages=NUM_STAGES, mpmd_dim=PP)

def forward(layers, params, x):
    for index, (layer, p) in enumerate(zip(layers, params)):
        if index in STAGE_FIRST_LAYER[1:]:
            x = jaxpp.pipeline_enter_stage(x)
        x = layer(p, x)
    return x

def make_train_step(loss_fn, optimizer):
    @partial(jaxpp.mpmd_jit_with_loop, mpmd_mesh=mpmd_mesh)
    def train_step(opt_state, params, batch):  # batch: [NUM_MICROBATCHES, MICROBATCH_SIZE, ...]
        grad_fn = partial(jax.value_and_grad(loss_fn), params)
        losses, grad = jaxpp.treduce(grad_fn, batch, schedule=schedule)
        updates, opt_state = optimizer.update(grad, opt_state, params)
        return opt_state, optax.apply_updates(params, updates), losses
    return train_step
