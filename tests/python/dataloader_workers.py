"""dataloader_workers.py OUT_DIR PERSISTENT - a PyTorch DataLoader with two workers (fork), each
item loaded in a "load_item" section of the program's sonde profiler, two epochs of 64 items;
PERSISTENT 1: persistent_workers=True, whose workers torch ends with SIGTERM at the program's
end, their own handler calling _exit (test_torch.py, issue 62: every worker's sections lost
before). Prints "done"."""
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

import sonde


class Items(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        with sonde.current().profile("load_item"):
            time.sleep(0.002)
        return torch.full((4,), float(i))


if __name__ == "__main__":
    cfg = {"name": "dl", "output_dir": sys.argv[1], "formats": "json", "collect_cpu": False,
           "collect_memory": False, "collect_gpu": False}
    with sonde.Profiler(cfg, from_env=False) as prof:
        loader = DataLoader(Items(), batch_size=8, num_workers=2,
                            persistent_workers=sys.argv[2] == "1")
        for epoch in range(2):
            for batch in loader:
                with prof.profile("train_step"):
                    batch.sum()
    print("done")
