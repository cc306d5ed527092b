"""PPO (Schulman et al. 2017) with our Keras 3 networks: TF-Agents' ``PPOClipAgent``."""

import tensorflow as tf
import tensorflow_probability as tfp
from tf_agents.agents.ppo import ppo_clip_agent

from keras_relational.agents.tf_agents.keras3_network import Keras3Network


def make_ppo_agent(time_step_spec, action_spec, model_fn, learning_rate, discount, entropy_cost,
                   gradient_clip_norm, num_epochs, train_step=None):
    """TF-Agents' ``PPOClipAgent`` with our Keras 3 network as actor and as value function.

    The actor and the value network are two copies of the same Keras 3 architecture (TF-Agents'
    PPO keeps them separate); the actor's logits become a ``tfp`` Categorical on the TF side.
    Adam, importance-ratio clipping 0.2 and GAE advantages.
    """
    actor_net = Keras3Network(
        time_step_spec.observation, model_fn, name="actor_network",
        output_fn=lambda outputs: tfp.distributions.Categorical(logits=outputs[0],
                                                                dtype=action_spec.dtype))
    value_net = Keras3Network(time_step_spec.observation, model_fn, name="value_network",
                              output_fn=lambda outputs: outputs[1])
    # Each copy trains one head only; freezing the other keeps it out of the optimised variables
    # (otherwise TensorFlow warns at every step that it gets no gradient).
    for net, unused_head in ((actor_net, "value_head"), (value_net, "policy_logits")):
        layer_names = {layer.name for layer in net.keras_model.layers}
        if unused_head in layer_names:
            net.keras_model.get_layer(unused_head).trainable = False
    return ppo_clip_agent.PPOClipAgent(
        time_step_spec, action_spec, optimizer=tf.keras.optimizers.Adam(learning_rate),
        actor_net=actor_net, value_net=value_net, importance_ratio_clipping=0.2,
        discount_factor=discount, entropy_regularization=entropy_cost, num_epochs=num_epochs,
        use_gae=True, normalize_observations=False, normalize_rewards=False,
        gradient_clipping=gradient_clip_norm, compute_value_and_advantage_in_train=True,
        update_normalizers_in_train=False, train_step_counter=train_step)
