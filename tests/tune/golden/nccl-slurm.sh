# NCCL settings for Slurm batch scripts: written by clusterctl tune-nccl.
# NCCL 2.28.3, fabric: ib. Paste after the #SBATCH lines;
# srun passes the exported environment to every task.
# NCCL_SOCKET_IFNAME differs on gpu-2: see the per-host nccl.conf files.
# 2 active IB ports in GPU order (GPU0->mlx5_0, GPU1->mlx5_1)
export NCCL_IB_HCA==mlx5_0:1,mlx5_1:1
# eno1 carries the inventory address 10.0.0.11
export NCCL_SOCKET_IFNAME==eno1
# rail-optimised: every host has the same GPU-to-NIC layout
export NCCL_CROSS_NIC=0
# measured: large messages +20%
export NCCL_BUFFSIZE=8388608
# the per-size algorithm/protocol winners of the sweep, as CSV
export NCCL_TUNER_CONFIG_FILE=/etc/nccl_tuner.conf
# NCCL's example tuner plugin applies the per-size algorithm/protocol winners of the sweep
export NCCL_TUNER_PLUGIN=example
