"""CaPtain training: policy client, SFT, RL with the simulator critic, evaluation."""
