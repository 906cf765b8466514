// The task head of an HF config (implhf): the class `architectures` names, its num_labels
// (PretrainedConfig: len(id2label) when id2label is given, else num_labels, else 2) and its loss
// (problem_type, or what the ForSequenceClassification forward infers). Classes per family as
// the modeled transformers release defines them:
//   modeling_bert.py @ 8ec58104: BertForMaskedLM (BertModel(add_pooling_layer=False), MLM head),
//     BertForSequenceClassification (BertModel with BertPooler: dense + tanh on hidden_states[:,
//     0]; dropout classifier_dropout or hidden_dropout_prob; classifier h -> num_labels with bias;
//     CrossEntropyLoss / MSELoss / BCEWithLogitsLoss by problem_type),
//     BertForTokenClassification (no pooler; dropout as above; classifier with bias).
//   modeling_gpt2.py @ c44b2d99: GPT2LMHeadModel; GPT2ForSequenceClassification (score h ->
//     num_labels without bias on every token, then the last non-pad token's logits; no dropout);
//     GPT2ForTokenClassification (dropout classifier_dropout, else hidden_dropout, else 0.1;
//     classifier with bias).
//   modeling_llama.py @ 5dd4a635 (and Mistral, Qwen2 of the same release): XForCausalLM;
//     XForSequenceClassification (score without bias, last non-pad token); XForTokenClassification
//     (dropout as GPT-2's; score with bias).
// Every other class (the bare XModel, BertForPreTraining's two heads, question answering,
// multiple choice, double heads, ...) is refused with one line naming `architectures`.
#include <string>
#include <string_view>

#include "hf_config.hpp"
#include "sim/error.hpp"

namespace sim_io::detail {
namespace {

// The class name's model prefix per model_type.
std::string_view class_prefix(std::string_view type) {
  if (type == "gpt2") return "GPT2";
  if (type == "llama") return "Llama";
  if (type == "mistral") return "Mistral";
  if (type == "qwen2") return "Qwen2";
  if (type == "bert") return "Bert";
  return {};
}

int64_t num_labels_of(const ObjectReader& in) {
  const Json& j = in.json();
  if (const auto it = j.find("id2label"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) in.fail("id2label", std::string("expected an object, got ") + it->type_name());
    // Count id2label, never label2id: a label2id may repeat a name (ViT's lists "crane" twice).
    const auto n = static_cast<int64_t>(it->size());
    if (n <= 0) in.fail("id2label", "must name at least one label");
    return n;
  }
  const int64_t n = in.integer_or("num_labels", 2);
  if (n <= 0) in.fail("num_labels", "must be a positive integer, got " + std::to_string(n));
  return n;
}

// Dropout before a token classifier (GPT2/LlamaForTokenClassification): classifier_dropout,
// else hidden_dropout, else 0.1.
double decoder_classifier_dropout(const ObjectReader& in) {
  const char* key = in.has("classifier_dropout") ? "classifier_dropout"
                    : in.has("hidden_dropout")   ? "hidden_dropout"
                                                 : nullptr;
  if (!key) return 0.1;
  const double p = in.number(key);
  if (!(p >= 0.0 && p < 1.0)) in.fail(key, "dropout probability must be in [0, 1)");
  return p;
}

void read_problem(const ObjectReader& in, sim::ModelConfig& m) {
  m.num_labels = num_labels_of(in);
  const std::string problem = in.string_or("problem_type", "");
  if (problem.empty()) {
    // the forward's inference for integer labels: regression for one label, else single-label
    m.class_loss = m.num_labels == 1 ? sim::ClassLoss::kMse : sim::ClassLoss::kCrossEntropy;
  } else if (problem == "regression") {
    m.class_loss = sim::ClassLoss::kMse;
  } else if (problem == "single_label_classification") {
    m.class_loss = sim::ClassLoss::kCrossEntropy;
  } else if (problem == "multi_label_classification") {
    m.class_loss = sim::ClassLoss::kBceWithLogits;
  } else {
    in.fail("problem_type", "unknown problem_type \"" + problem +
                                "\" (regression, single_label_classification, "
                                "multi_label_classification)");
  }
}

}  // namespace

void read_head(const ObjectReader& in, sim::ModelConfig& m, std::string_view type) {
  const bool bert = type == "bert";
  m.head = bert ? sim::Head::kMaskedLm : sim::Head::kCausalLm;  // no `architectures`: the LM head
  const Json& j = in.json();
  const auto it = j.find("architectures");
  if (it == j.end() || it->is_null()) return;
  if (!it->is_array() || it->empty())
    in.fail("architectures", "expected a non-empty list of class names");
  std::string arch;
  for (const Json& a : *it) {
    if (!a.is_string()) in.fail("architectures", "expected a list of class names");
    if (!arch.empty() && a.get<std::string>() != arch)
      throw sim::Unsupported(in.source(), "architectures",
                             "more than one head class (" + arch + ", " + a.get<std::string>() +
                                 "): name the one trained");
    arch = a.get<std::string>();
  }
  const std::string prefix(class_prefix(type));
  // The head is the class's suffix: model_type picks the modeling file (the Auto classes map
  // model_type to the class), and older configs spell the prefix otherwise ("LLaMAForCausalLM").
  const auto ends = [&](std::string_view suffix) {
    return arch.size() >= suffix.size() &&
           std::string_view(arch).substr(arch.size() - suffix.size()) == suffix;
  };
  if (bert && ends("ForMaskedLM")) {
    m.head = sim::Head::kMaskedLm;
  } else if (!bert && (ends("ForCausalLM") || (type == "gpt2" && ends("LMHeadModel") &&
                                               !ends("DoubleHeadsModel")))) {
    m.head = sim::Head::kCausalLm;
  } else if (ends("ForSequenceClassification")) {
    m.head = sim::Head::kSequenceClassification;
    read_problem(in, m);
    if (bert) {
      m.seq_pool = sim::SeqPool::kFirstTokenPooler;
      m.classifier_bias = true;
      m.classifier_dropout = in.has("classifier_dropout") ? in.number("classifier_dropout")
                                                          : m.hidden_dropout;
    } else {
      m.seq_pool = type == "gpt2" ? sim::SeqPool::kLastToken : sim::SeqPool::kLastTokenProduct;
      m.classifier_bias = false;  // score = nn.Linear(h, num_labels, bias=False)
      m.classifier_dropout = 0.0;
    }
  } else if (ends("ForTokenClassification")) {
    m.head = sim::Head::kTokenClassification;
    read_problem(in, m);
    if (m.class_loss != sim::ClassLoss::kCrossEntropy || m.num_labels < 2) {
      // ForTokenClassification always computes CrossEntropyLoss
      m.class_loss = sim::ClassLoss::kCrossEntropy;
    }
    m.classifier_bias = true;
    m.classifier_dropout =
        bert ? (in.has("classifier_dropout") ? in.number("classifier_dropout") : m.hidden_dropout)
             : decoder_classifier_dropout(in);
  } else {
    throw sim::Unsupported(in.source(), "architectures",
                           "the head " + arch + " (" + std::string(type) + ": " + prefix +
                               (bert ? "ForMaskedLM" : type == "gpt2" ? "LMHeadModel" : "ForCausalLM") +
                               ", " + prefix + "ForSequenceClassification and " + prefix +
                               "ForTokenClassification are modeled)");
  }
  if (!(m.classifier_dropout >= 0.0 && m.classifier_dropout < 1.0))
    in.fail("classifier_dropout", "dropout probability must be in [0, 1)");
}

}  // namespace sim_io::detail
