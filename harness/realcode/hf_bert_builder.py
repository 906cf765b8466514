"""A harness/measure_torch.py builder: HF BERT's eager training step with a chosen head.

transformers does not install on this machine (Debian ships no python3-transformers and pip has
no network), so this module is written here, op for op, from the eager path of
huggingface/transformers `src/transformers/models/bert/modeling_bert.py` @ 8ec58104181b
(validation/real-code/README.md, "HF BERT heads"): the same modules, the same tensor operations
in the same order, the same lifetimes of Python locals. It holds no transformers code: it
reproduces what that file computes so that its allocations can be measured on torch 1.13.

    BertEmbeddings    word + token_type (the expanded zero buffer) + position embeddings (the
                      position_ids buffer), LayerNorm, dropout
    BertModel.forward attention_mask=None -> torch.ones(b, s); the eager path's extended mask
                      (1.0 - mask[:, None, None, :]) * finfo.min, [b, 1, 1, s], held for the
                      whole encoder
    BertSelfAttention q, k, v Linear; view + permute; matmul(q, k^T); `/ math.sqrt(d)`;
                      `+ attention_mask`; softmax; dropout; matmul(probs, v); permute +
                      contiguous + view
    BertSelfOutput    dense, dropout, LayerNorm(x + input); BertIntermediate dense + GELU;
                      BertOutput dense, dropout, LayerNorm(x + input)
    heads             mlm: BertOnlyMLMHead (transform dense, GELU, LayerNorm; decoder tied to
                      the word embeddings, with its own bias), CrossEntropyLoss over [b*s, V];
                      seqcls: BertPooler (dense + tanh on hidden_states[:, 0]), dropout,
                      classifier h -> num_labels, CrossEntropyLoss over [b, num_labels];
                      tokcls: dropout, classifier on every token, CrossEntropyLoss.

The step is the Trainer's: `outputs = model(**inputs)`, `loss = outputs.loss`, backward, the
optimizer step, zero_grad; nothing but the loss outlives compute_loss.
"""
import math

import torch
from torch import nn


class Embeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c["vocab"], c["hidden"], padding_idx=0)
        self.position_embeddings = nn.Embedding(c["max_positions"], c["hidden"])
        self.token_type_embeddings = nn.Embedding(c["type_vocab"], c["hidden"])
        self.LayerNorm = nn.LayerNorm(c["hidden"], eps=1e-12)
        self.dropout = nn.Dropout(c["dropout"])
        self.register_buffer("position_ids", torch.arange(c["max_positions"]).expand((1, -1)),
                             persistent=False)
        self.register_buffer("token_type_ids", torch.zeros(self.position_ids.size(),
                                                           dtype=torch.long), persistent=False)

    def forward(self, input_ids):
        seq_length = input_ids.size(1)
        position_ids = self.position_ids[:, 0:seq_length]
        buffered = self.token_type_ids[:, :seq_length]
        token_type_ids = buffered.expand(input_ids.size(0), seq_length)
        inputs_embeds = self.word_embeddings(input_ids)
        token_type_embeddings = self.token_type_embeddings(token_type_ids)
        embeddings = inputs_embeds + token_type_embeddings
        position_embeddings = self.position_embeddings(position_ids)
        embeddings += position_embeddings
        embeddings = self.LayerNorm(embeddings)
        embeddings = self.dropout(embeddings)
        return embeddings


class SelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads, self.head_size = c["heads"], c["hidden"] // c["heads"]
        self.all_head_size = self.heads * self.head_size
        self.query = nn.Linear(c["hidden"], self.all_head_size)
        self.key = nn.Linear(c["hidden"], self.all_head_size)
        self.value = nn.Linear(c["hidden"], self.all_head_size)
        self.dropout = nn.Dropout(c["dropout"])

    def transpose_for_scores(self, x):
        x = x.view(x.size()[:-1] + (self.heads, self.head_size))
        return x.permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask):
        mixed_query_layer = self.query(hidden_states)
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        query_layer = self.transpose_for_scores(mixed_query_layer)
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.head_size)
        attention_scores = attention_scores + attention_mask
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        attention_probs = self.dropout(attention_probs)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        context_layer = context_layer.view(context_layer.size()[:-2] + (self.all_head_size,))
        return context_layer


class AddNorm(nn.Module):  # BertSelfOutput and BertOutput
    def __init__(self, c, inner):
        super().__init__()
        self.dense = nn.Linear(inner, c["hidden"])
        self.LayerNorm = nn.LayerNorm(c["hidden"], eps=1e-12)
        self.dropout = nn.Dropout(c["dropout"])

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return self.LayerNorm(hidden_states + input_tensor)


class Layer(nn.Module):  # BertLayer: BertAttention, BertIntermediate, BertOutput
    def __init__(self, c):
        super().__init__()
        self.self_attn = SelfAttention(c)
        self.attn_out = AddNorm(c, c["hidden"])
        self.intermediate = nn.Linear(c["hidden"], c["ffn"])
        self.act = nn.GELU()  # ACT2FN["gelu"]: GELUActivation -> nn.functional.gelu
        self.output = AddNorm(c, c["ffn"])

    def forward(self, hidden_states, attention_mask):
        self_outputs = self.self_attn(hidden_states, attention_mask)
        attention_output = self.attn_out(self_outputs, hidden_states)
        intermediate_output = self.act(self.intermediate(attention_output))
        return self.output(intermediate_output, attention_output)


class Bert(nn.Module):
    def __init__(self, c, head):
        super().__init__()
        self.c, self.head = c, head
        self.embeddings = Embeddings(c)
        self.layer = nn.ModuleList([Layer(c) for _ in range(c["layers"])])
        h = c["hidden"]
        if head == "seqcls":
            self.pooler = nn.Linear(h, h)
        if head in ("seqcls", "tokcls"):
            self.cls_dropout = nn.Dropout(c["dropout"])
            self.classifier = nn.Linear(h, c["num_labels"])
        else:  # BertOnlyMLMHead, decoder tied to the word embeddings
            self.transform = nn.Linear(h, h)
            self.transform_norm = nn.LayerNorm(h, eps=1e-12)
            self.decoder_bias = nn.Parameter(torch.zeros(c["vocab"]))

    def encoder(self, input_ids):
        b, s = input_ids.shape
        attention_mask = torch.ones((b, s))
        extended = attention_mask[:, None, None, :]
        extended = (1.0 - extended) * torch.finfo(torch.float32).min
        hidden_states = self.embeddings(input_ids)
        for layer in self.layer:
            hidden_states = layer(hidden_states, extended)
        return hidden_states

    def forward(self, input_ids, labels):
        sequence_output = self.encoder(input_ids)
        if self.head == "seqcls":
            first_token_tensor = sequence_output[:, 0]
            pooled_output = torch.tanh(self.pooler(first_token_tensor))
            pooled_output = self.cls_dropout(pooled_output)
            logits = self.classifier(pooled_output)
            return nn.CrossEntropyLoss()(logits.view(-1, self.c["num_labels"]), labels.view(-1))
        if self.head == "tokcls":
            sequence_output = self.cls_dropout(sequence_output)
            logits = self.classifier(sequence_output)
            return nn.CrossEntropyLoss()(logits.view(-1, self.c["num_labels"]), labels.view(-1))
        x = self.transform_norm(nn.functional.gelu(self.transform(sequence_output)))
        prediction_scores = nn.functional.linear(x, self.embeddings.word_embeddings.weight,
                                                 self.decoder_bias)
        return nn.CrossEntropyLoss()(prediction_scores.view(-1, self.c["vocab"]), labels.view(-1))


def build(head="seqcls", layers=4, hidden=256, heads=4, ffn=1024, vocab=30522, max_positions=512,
          type_vocab=2, num_labels=2, batch=4, seq=128, seed=0):
    if head not in ("seqcls", "tokcls", "mlm"):
        raise ValueError("head must be seqcls, tokcls or mlm")
    c = dict(layers=layers, hidden=hidden, heads=heads, ffn=ffn, vocab=vocab,
             max_positions=max_positions, type_vocab=type_vocab, num_labels=num_labels,
             dropout=0.0)
    torch.manual_seed(seed)
    model = Bert(c, head)
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, vocab, (batch, seq), generator=g)
    if head == "seqcls":
        y = torch.randint(0, num_labels, (batch,), generator=g)
    elif head == "tokcls":
        y = torch.randint(0, num_labels, (batch, seq), generator=g)
    else:
        y = torch.randint(0, vocab, (batch, seq), generator=g)

    def loss_fn(m, inputs):
        return m(inputs[0], inputs[1])
    return {"model": model, "blocks": list(model.layer), "loss_fn": loss_fn, "inputs": (x, y)}
