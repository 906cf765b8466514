// implhf: heads from an HF config's `architectures` (sim_io hf_heads.cpp; sim/src/blocks_heads.cpp).
#include <doctest/doctest.h>

#include <string>

#include "fixtures.hpp"
#include "sim/error.hpp"
#include "sim_io/load.hpp"

using namespace sim;

namespace {

const char* kBertBase =
    R"("attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
       "hidden_size": 768, "intermediate_size": 3072, "max_position_embeddings": 512,
       "model_type": "bert", "num_attention_heads": 12, "num_hidden_layers": 12,
       "type_vocab_size": 2, "vocab_size": 30522)";

ModelConfig bert(const std::string& extra) {
  return sim_io::parse_model("{" + std::string(kBertBase) + extra + "}", "bert-base", "bert.json");
}

const char* kGpt2 =
    R"("model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024,
       "vocab_size": 50257)";

ModelConfig gpt2(const std::string& extra) {
  return sim_io::parse_model("{" + std::string(kGpt2) + extra + "}", "gpt2", "gpt2.json");
}

TrainSetup hf(int64_t b, int64_t s, Precision p) {
  TrainSetup t;
  t.impl = Impl::kHf;
  t.micro_batch = b;
  t.seq = s;
  t.precision = p;
  return t;
}

template <typename E, typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("expected an error");
  return {};
}

}  // namespace

TEST_CASE("architectures: the head, num_labels from id2label, the classifier's dropout") {
  CHECK(bert("").head == Head::kMaskedLm);  // no architectures: the family's LM head
  CHECK(bert(R"(, "architectures": ["BertForMaskedLM"])").head == Head::kMaskedLm);
  CHECK(gpt2("").head == Head::kCausalLm);
  CHECK(gpt2(R"(, "architectures": ["GPT2LMHeadModel"])").head == Head::kCausalLm);

  // bert-base-uncased as BertForSequenceClassification with 3 labels (MNLI): 109,514,298 less
  // the MLM head (dense h*h + h, LayerNorm 2h, decoder bias v) plus the pooler (h*h + h) and
  // the classifier (3h + 3) = 109,484,547 (bert-base-uncased-MNLI checkpoints report 109.48M).
  const ModelConfig seq = bert(
      R"(, "architectures": ["BertForSequenceClassification"],
         "id2label": {"0": "a", "1": "b", "2": "c"}, "label2id": {"a": 0, "b": 1, "c": 2})");
  CHECK(seq.head == Head::kSequenceClassification);
  CHECK(seq.seq_pool == SeqPool::kFirstTokenPooler);
  CHECK(seq.num_labels == 3);
  CHECK(seq.class_loss == ClassLoss::kCrossEntropy);
  CHECK(seq.classifier_dropout == 0.1);  // classifier_dropout null: hidden_dropout_prob
  CHECK(parameter_count(seq) == 109'514'298 - (768 * 768 + 768) - 2 * 768 - 30522 +
                                    (768 * 768 + 768) + 3 * 768 + 3);
  // label2id with a repeated name (vit-base-patch16-224's "crane"): id2label counts
  const ModelConfig dup = bert(
      R"(, "architectures": ["BertForSequenceClassification"],
         "id2label": {"0": "crane", "1": "crane", "2": "x"},
         "label2id": {"crane": 0, "crane": 1, "x": 2}, "num_labels": 2)");
  CHECK(dup.num_labels == 3);
  // no id2label: num_labels, else PretrainedConfig's default 2; one label is regression
  CHECK(bert(R"(, "architectures": ["BertForSequenceClassification"])").num_labels == 2);
  const ModelConfig reg =
      bert(R"(, "architectures": ["BertForSequenceClassification"], "num_labels": 1)");
  CHECK(reg.class_loss == ClassLoss::kMse);
  CHECK(bert(R"(, "architectures": ["BertForSequenceClassification"],
                 "problem_type": "multi_label_classification", "classifier_dropout": 0.2)")
            .classifier_dropout == 0.2);

  const ModelConfig gseq = gpt2(R"(, "architectures": ["GPT2ForSequenceClassification"],
                                    "id2label": {"0": "neg", "1": "pos"})");
  CHECK(gseq.seq_pool == SeqPool::kLastToken);
  CHECK_FALSE(gseq.classifier_bias);
  // GPT2ForSequenceClassification: the LM head was tied (no parameters of its own); score 2h
  CHECK(parameter_count(gseq) == parameter_count(gpt2("")) + 2 * 768);
  const ModelConfig gtok = gpt2(R"(, "architectures": ["GPT2ForTokenClassification"],
                                    "num_labels": 9)");
  CHECK(gtok.head == Head::kTokenClassification);
  CHECK(gtok.classifier_dropout == 0.1);  // neither classifier_dropout nor hidden_dropout
  CHECK(parameter_count(gtok) == parameter_count(gpt2("")) + 9 * 768 + 9);
}

TEST_CASE("architectures: a head not modeled is refused with one line naming the key") {
  for (const char* arch : {"BertForPreTraining", "BertModel", "BertForQuestionAnswering",
                           "BertForMultipleChoice", "BertLMHeadModel"}) {
    CAPTURE(arch);
    const std::string extra = std::string(R"(, "architectures": [")") + arch + "\"]";
    const auto e = error_of<Unsupported>([&] { bert(extra); });
    CHECK(e.find("bert.json") != std::string::npos);
    CHECK(e.find("architectures") != std::string::npos);
    CHECK(e.find(arch) != std::string::npos);
    CHECK(e.find('\n') == std::string::npos);
  }
  CHECK(error_of<Unsupported>([] { gpt2(R"(, "architectures": ["GPT2DoubleHeadsModel"])"); })
            .find("GPT2DoubleHeadsModel") != std::string::npos);
  // model_type picks the modeling file; the class's suffix picks the head (old spellings too)
  const std::string llama =
      R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
          "num_attention_heads": 4, "num_hidden_layers": 2, "max_position_embeddings": 128,
          "vocab_size": 100, "architectures": ["LLaMAForCausalLM"]})";
  CHECK(sim_io::parse_model(llama, "l", "l.json").head == Head::kCausalLm);
  CHECK(error_of<ConfigError>([] {
          bert(R"(, "architectures": ["BertForSequenceClassification"], "problem_type": "x")");
        }).find("problem_type") != std::string::npos);
  CHECK(error_of<ConfigError>([] { bert(R"(, "architectures": "BertForMaskedLM")"); })
            .find("architectures") != std::string::npos);
}

TEST_CASE("sequence classification: no vocabulary-sized logits, the pooler's rows are b") {
  const int64_t b = 8, s = 128, v = 30522, h = 768;
  const ModelConfig mlm = bert("");
  const ModelConfig cls = bert(R"(, "architectures": ["BertForSequenceClassification"],
                                   "id2label": {"0": "a", "1": "b"})");
  for (Precision p : {Precision::kFp32, Precision::kBf16Amp}) {
    CAPTURE(static_cast<int>(p));
    TrainSetup t = hf(b, s, p);
    t.attention = AttentionKind::kStandard;
    const Result a = fixtures::run(mlm, t, "none");
    const Result c = fixtures::run(cls, t, "none");
    // every block is the same
    CHECK(a.activation_bytes_per_layer == c.activation_bytes_per_layer);
    CHECK(c.params == parameter_count(cls));
    CHECK(c.params_per_rank == parameter_count(cls));
    // the MLM head's peak includes fp32 log-probabilities of b*s*v; the classifier's none
    CHECK(a.peak_allocated_bytes - c.peak_allocated_bytes > 4 * b * s * v);
    (void)h;
  }
  // the classification head refuses under code bases that only train language models
  TrainSetup nano = hf(2, 128, Precision::kFp32);
  nano.impl = Impl::kMegatron;
  ModelConfig g = gpt2(R"(, "architectures": ["GPT2ForSequenceClassification"])");
  const auto e = error_of<Unsupported>([&] { fixtures::run(g, nano, "none"); });
  CHECK(e.find("sequence-classification") != std::string::npos);
  CHECK(e.find("--impl megatron") != std::string::npos);
}

TEST_CASE("token classification: the classifier's logits are b*s*num_labels, not b*s*v") {
  const int64_t b = 4, s = 256;
  const ModelConfig lm = gpt2("");
  const ModelConfig tok = gpt2(R"(, "architectures": ["GPT2ForTokenClassification"],
                                   "num_labels": 9, "classifier_dropout": 0.0)");
  TrainSetup t = hf(b, s, Precision::kFp32);
  t.dropout = 0.0;
  const Result a = fixtures::run(lm, t, "none");
  const Result c = fixtures::run(tok, t, "none");
  CHECK(a.activation_bytes_per_layer == c.activation_bytes_per_layer);
  CHECK(c.peak_allocated_bytes < a.peak_allocated_bytes);
  CHECK(c.params == parameter_count(tok));
}

TEST_CASE("LlamaForSequenceClassification: no lm_head, the score on every token, no bias") {
  const std::string base =
      R"("model_type": "llama", "hidden_size": 256, "intermediate_size": 688,
         "num_attention_heads": 8, "num_key_value_heads": 2, "num_hidden_layers": 2,
         "max_position_embeddings": 2048, "vocab_size": 1000, "pad_token_id": 0)";
  const ModelConfig lm = sim_io::parse_model("{" + base + "}", "l", "l.json");
  const ModelConfig cls = sim_io::parse_model(
      "{" + base + R"(, "architectures": ["LlamaForSequenceClassification"], "num_labels": 5})",
      "l", "l.json");
  CHECK(cls.seq_pool == SeqPool::kLastTokenProduct);
  CHECK_FALSE(cls.classifier_bias);
  // the untied lm_head (v x h) is gone; score h x 5 comes instead
  CHECK(parameter_count(cls) == parameter_count(lm) - 1000 * 256 + 5 * 256);
  const Result r = fixtures::run(cls, hf(2, 64, Precision::kBf16Amp), "none");
  CHECK(r.params == parameter_count(cls));
  CHECK(r.end_bytes == r.baseline_bytes);
}
