"""Section `forward`: inference latency (fp32, `seq` tokens per sequence) at the plan's batch sizes."""

import torch

from .harness import Session, interleave, paired_speedup, summary
from .models import FAMILY_KIND, PARITY_TOLERANCE, make_pair, random_ids
from .plan import Plan


def measure(plan: Plan, session: Session) -> list[dict]:
    device = session.device
    rows = []
    for family in plan.train_families:
        reference, ours = make_pair(family, plan, device)
        for batch_size in plan.forward_batches:
            ids = random_ids(plan, batch_size, plan.seq, device, seed=3)
            inputs = {"input_ids": ids}
            if FAMILY_KIND[family] == "seq2seq":
                inputs["decoder_input_ids"] = random_ids(plan, batch_size, plan.seq, device, seed=4)

            def call(model, inputs=inputs):
                with torch.inference_mode():
                    return model(**inputs).logits

            with torch.inference_mode():
                diff = (call(reference) - call(ours)).abs().max().item()
            assert diff <= PARITY_TOLERANCE, f"{family}: forward logits differ by {diff:.3g}"
            times = interleave(
                {"hf": lambda m=reference: call(m), "ours": lambda m=ours: call(m)},
                rounds=plan.forward_rounds,
                warmup=plan.warmup,
                device=device,
            )
            row = {
                "family": family,
                "batch": batch_size,
                "seq": plan.seq,
                "speedup": paired_speedup(times["hf"], times["ours"]),
            }
            for name, t in times.items():
                row[name] = summary(t, batch_size * plan.seq)
            rows.append(row)
            session.log(
                f"forward {family:5s} b{batch_size}: hf {row['hf']['median_s'] * 1e3:7.2f} ms, ours "
                f"{row['ours']['median_s'] * 1e3:7.2f} ms, speed-up {row['speedup']:.2f}x"
            )
        del reference, ours
    return rows
