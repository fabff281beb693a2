#!/usr/bin/env python3
"""hvd_fmnist.py: a PyTorch script trained data-parallel through dtrain.torch, Horovod's API on libdt.

A plain single-process Fashion-MNIST script with exactly the Horovod changes that AIACC-Training's
page lists (each marked "Horovod:" below): init, the GPU of the local rank, the learning rate times
the number of ranks, DistributedOptimizer, the two broadcasts, a DistributedSampler, the accuracy
averaged over the ranks and the checkpoint written by rank 0 only. Start it as any Horovod script:

    mpirun -np 2 python3 doc/examples/hvd_fmnist.py --epochs 2
    srun --mpi=pmix -N2 python3 doc/examples/hvd_fmnist.py     (CPU nodes; slurm/hvd_fmnist.sbatch)
    srun --mpi=pmi2 -N2 --gpus-per-node=4 --ntasks-per-node=4 python3 doc/examples/hvd_fmnist.py

(from a build tree: PYTHONPATH=BUILD/python). The model is torchvision's resnet18 with 10 classes, its
first convolution taking 1 channel instead of 3; the rest is torchvision's, stem included: at 28x28
the 7x7/2 convolution and the max pool leave 7x7 maps, so a training image costs about 5 ms on one
core (the 3x3/1 stem usual for 28x28 inputs costs 2.3 times that, and eval 7 times), which keeps an
epoch of the whole set under 3 minutes on 2 cores and the tests' short runs to seconds.

The data are the IDX files of Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist),
read with gzip and numpy: nothing is downloaded. Rank 0 prints one line per epoch: the training
loss and the test accuracy, each averaged over the ranks.
"""
import argparse
import gzip
import os
import socket
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data
import torch.utils.data.distributed
import torchvision

# Horovod: the API. AIACC users may write `import dtrain.torch.horovod as hvd` (AIACC's spelling,
# `perseus.torch.horovod`): the same module.
import dtrain.torch as hvd

# Fashion-MNIST's training-set mean and standard deviation of the pixel values in [0, 1]
MEAN, STD = 0.2860, 0.3530


def read_idx(path, magic, header):
    """The array of an IDX file (gzip-compressed or not): uint8 items after a big-endian header of
    header bytes (the magic number, the item count, then the image size for images)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < header or int.from_bytes(raw[0:4], "big") != magic:
        sys.exit("hvd_fmnist.py: %s: not an IDX file of magic 0x%08x" % (path, magic))
    n = int.from_bytes(raw[4:8], "big")
    data = np.frombuffer(raw, dtype=np.uint8, offset=header)
    if n == 0 or data.size % n != 0:
        sys.exit("hvd_fmnist.py: %s: %d bytes of items for %d items" % (path, data.size, n))
    return data.reshape(n, data.size // n)


def load_split(root, split, limit):
    """(images (N, 1, 28, 28) float32, normalized; labels (N,) int64) of split 'train' or 't10k',
    the first limit items (0: all)."""
    def path(kind):
        p = os.path.join(root, "%s-%s" % (split, kind))
        return p + ".gz" if os.path.exists(p + ".gz") else p

    images = read_idx(path("images-idx3-ubyte"), 0x00000803, 16)
    labels = read_idx(path("labels-idx1-ubyte"), 0x00000801, 8).reshape(-1)
    if images.shape[0] != labels.shape[0] or images.shape[1] != 28 * 28:
        sys.exit("hvd_fmnist.py: %s: %d images of %d bytes and %d labels" %
                 (root, images.shape[0], images.shape[1], labels.shape[0]))
    if limit > 0:
        images, labels = images[:limit], labels[:limit]
    x = torch.from_numpy(images.astype(np.float32) / 255.0).view(-1, 1, 28, 28)
    return (x - MEAN) / STD, torch.from_numpy(labels.astype(np.int64))


def make_model():
    model = torchvision.models.resnet18(num_classes=10)
    # one input channel; the rest of torchvision's resnet18 unchanged
    model.conv1 = nn.Conv2d(1, 64, kernel_size=7, stride=2, padding=3, bias=False)
    return model


def main():
    p = argparse.ArgumentParser(description="resnet18 on Fashion-MNIST through dtrain.torch (Horovod's API)")
    p.add_argument("--epochs", type=int, default=2, help="epochs (default 2)")
    p.add_argument("--batch-size", type=int, default=64, help="images per rank and step (default 64)")
    p.add_argument("--lr", type=float, default=0.01, help="learning rate of one rank, times the ranks (default 0.01)")
    p.add_argument("--limit", type=int, default=0, help="train on the first N training images only (default 0: all)")
    p.add_argument("--test-limit", type=int, default=0, help="test on the first N test images only (default 0: all)")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist",
                   help="directory of the IDX files (default /usr/share/datasets/fashion-mnist)")
    p.add_argument("--checkpoint", default="hvd_fmnist.pt", help="written by rank 0 after each epoch (default hvd_fmnist.pt)")
    p.add_argument("--seed", type=int, default=42, help="seed of the weights and the shuffling (default 42)")
    args = p.parse_args()
    for name in ("epochs", "batch_size"):
        if getattr(args, name) < 1:
            p.error("--%s must be at least 1" % name.replace("_", "-"))
    if args.limit < 0 or args.test_limit < 0:
        p.error("--limit and --test-limit must be 0 (all) or more")

    # Horovod: initialize (ranks from mpirun, srun's PMIx or PMI2, or one process alone).
    hvd.init()
    torch.manual_seed(args.seed)

    cuda = torch.cuda.is_available()
    if cuda:
        # Horovod: one GPU per process, the local rank's.
        torch.cuda.set_device(hvd.local_rank())
        device = torch.device("cuda", hvd.local_rank())
    else:
        device = torch.device("cpu")
        # the node's cores shared among its ranks (OMP_NUM_THREADS, when set, wins): 2 ranks of 2
        # threads each on 2 cores run slower than 2 of 1
        if "OMP_NUM_THREADS" not in os.environ:
            torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // hvd.local_size()))
    print("rank %d of %d (local rank %d of %d) on %s, %s" %
          (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size(), socket.gethostname(),
           "GPU %d" % hvd.local_rank() if cuda else "CPU, %d thread(s)" % torch.get_num_threads()), flush=True)

    train_x, train_y = load_split(args.data, "train", args.limit)
    test_x, test_y = load_split(args.data, "t10k", args.test_limit)
    train_set = torch.utils.data.TensorDataset(train_x, train_y)
    test_set = torch.utils.data.TensorDataset(test_x, test_y)
    # Horovod: each rank its share of the data. No loader processes (num_workers 0): the data are
    # already in memory, and a fork of a process running MPI and libdt's thread is not safe.
    train_sampler = torch.utils.data.distributed.DistributedSampler(
        train_set, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True, seed=args.seed)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size, sampler=train_sampler)
    # The sampler pads the test set with its first images to a multiple of the ranks, so each rank
    # tests as many images and the mean of the ranks' accuracies is the accuracy of the (padded) set.
    test_sampler = torch.utils.data.distributed.DistributedSampler(
        test_set, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=False)
    test_loader = torch.utils.data.DataLoader(test_set, batch_size=256, sampler=test_sampler)

    model = make_model().to(device)
    # Horovod: the learning rate scaled by the number of ranks (the global batch is size() times larger).
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9, weight_decay=5e-4)
    # Horovod: every rank starts from rank 0's weights and optimizer state.
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    # Horovod: gradients averaged over the ranks, each all-reduce starting as backward produces it.
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        model.train()
        train_sampler.set_epoch(epoch)   # a new shuffle each epoch, the same on every rank
        loss_sum, batches = 0.0, 0
        for x, y in train_loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            loss_sum += loss.item()
            batches += 1

        model.eval()
        correct = 0
        with torch.no_grad():
            for x, y in test_loader:
                x, y = x.to(device), y.to(device)
                correct += (model(x).argmax(dim=1) == y).sum().item()
        # Horovod: this rank's numbers averaged over the ranks (hvd.allreduce averages by default).
        train_loss = hvd.allreduce(torch.tensor(loss_sum / max(batches, 1)), name="train_loss").item()
        accuracy = hvd.allreduce(torch.tensor(correct / max(len(test_sampler), 1)), name="test_accuracy").item()

        if hvd.rank() == 0:
            print("epoch %d/%d: train loss %.4f, test accuracy %.4f (%d ranks, %.1f s)" %
                  (epoch, args.epochs, train_loss, accuracy, hvd.size(), time.perf_counter() - start), flush=True)
            # Horovod: the checkpoint from rank 0 only (the ranks hold the same weights). Written
            # beside, then renamed: an interrupted write leaves the previous checkpoint whole.
            tmp = args.checkpoint + ".tmp"
            torch.save({"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, tmp)
            os.replace(tmp, args.checkpoint)
            print("rank %d: checkpoint of epoch %d written to %s" % (hvd.rank(), epoch, args.checkpoint), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
