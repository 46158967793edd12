"""Train the bundled tiny language model (``hf:tiny-shakespeare``) with accelbench's own training step.

Recipe (reproducible, CPU, ~4 min on 2 idle cores; the shipped model: ``--steps 600``, held-out perplexity 41.4):
  1. the text: ``src/accelbench/assets/text/tinyshakespeare.txt`` (see that folder's README), split by
     :func:`accelbench.data.text.split` into train (first 90 %) and held-out (last 10 %) characters;
  2. a byte-level BPE tokenizer (Hugging Face ``tokenizers``, vocab 1,024) trained on the train split only;
  3. a Llama-architecture decoder (4 layers, hidden 192, 4 query heads and 2 key-value heads (grouped-query
     attention), SwiGLU MLP 512, tied embeddings, context 512; ~1.8 M parameters) trained on random 128-token
     windows of the train split by :func:`accelbench.training.step.build_step` (AdamW, lr 3e-3 with linear warm-up
     and cosine decay, weight decay 0.1, fp32), the logits flattened so the step's cross-entropy is the
     next-token loss;
  4. every ``--eval-every`` steps the held-out perplexity (:func:`accelbench.scenarios.generate.perplexity.perplexity`)
     is measured; the best checkpoint is saved as safetensors (bf16) with its tokenizer and config.

Run: ``PYTHONPATH=src python3 benchmarks/train_tiny_lm.py --out src/accelbench/assets/llm/tiny-shakespeare``
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
TEXT = ROOT / "src/accelbench/assets/text/tinyshakespeare.txt"


class NextToken(torch.nn.Module):
    """A causal LM as the training step expects: ``(B, T)`` token ids -> ``(B * T, vocab)`` logits."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, x):
        return self.lm(input_ids=x).logits.reshape(-1, self.lm.config.vocab_size)


def tokenizer_for(train_text: str, vocab: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([train_text], trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        model_max_length=512,
    )


def main() -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    from accelbench.data.text import split
    from accelbench.scenarios.generate.perplexity import perplexity
    from accelbench.training.step import StepConfig, build_step

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    train_text, held_out = split(TEXT.read_text(encoding="utf-8"))
    tok = tokenizer_for(train_text, 1024)
    train_ids = torch.tensor(tok(train_text)["input_ids"])
    eval_ids = torch.tensor(tok(held_out)["input_ids"])
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=192,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        rms_norm_eps=1e-5,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    lm = LlamaForCausalLM(cfg)
    device = torch.device("cpu")
    step = build_step(
        NextToken(lm),
        StepConfig(precision="fp32", optimizer="adamw", lr=args.lr, weight_decay=0.1, momentum=0.9),
        device,
    )
    log, best = [], (math.inf, None)
    t0 = time.time()
    for i in range(1, args.steps + 1):
        warm = min(1.0, i / 50)
        step.set_lr(args.lr * warm * 0.5 * (1 + math.cos(math.pi * i / args.steps)))
        starts = torch.randint(0, len(train_ids) - args.seq - 1, (args.batch,))
        x = torch.stack([train_ids[s : s + args.seq] for s in starts])
        y = torch.stack([train_ids[s + 1 : s + args.seq + 1] for s in starts]).reshape(-1)
        loss, _ = step(x, y)
        if i % args.eval_every == 0 or i == args.steps:
            lm.eval()
            ppl = perplexity(lm, eval_ids, window=256, batch_size=16, device=device)
            lm.train()
            log.append(
                {
                    "step": i,
                    "train_loss": float(loss),
                    "held_out_perplexity": ppl.perplexity,
                    "elapsed_s": time.time() - t0,
                }
            )
            print(json.dumps(log[-1]), flush=True)
            if ppl.perplexity < best[0]:
                best = (ppl.perplexity, {k: v.detach().clone() for k, v in lm.state_dict().items()})
    lm.load_state_dict(best[1])
    args.out.mkdir(parents=True, exist_ok=True)
    lm.to(torch.bfloat16).save_pretrained(args.out, safe_serialization=True)
    tok.save_pretrained(args.out)
    (args.out / "training_log.json").write_text(
        json.dumps(
            {
                "args": {k: str(v) for k, v in vars(args).items()},
                "tokens_train": len(train_ids),
                "tokens_held_out": len(eval_ids),
                "log": log,
            },
            indent=1,
        )
    )
    print(f"best held-out perplexity {best[0]:.3f}; saved to {args.out}")


if __name__ == "__main__":
    main()
