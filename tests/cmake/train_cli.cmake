# `kipp train` end to end on a tiny config (real Qwen3 tokenizer, the repository's own docs as
# the corpus): training lowers the loss, resume is bitwise exact (also after SIGKILL during
# saves), bad configs and runs fail cleanly, and the exported GGUF serves the trained logits.
set(KIPP_TRAIN_CONFIG ${CMAKE_CURRENT_SOURCE_DIR}/train/test_tiny.yaml)
set(KIPP_TRAIN_TOKENIZER ${KIPP_MODELS}/tiny-hf/tokenizer.json)
set(KIPP_TRAIN_WORK ${CMAKE_BINARY_DIR}/train)
set(KIPP_TRAIN_CORPUS ${KIPP_TRAIN_WORK}/corpus.txt)
set(KIPP_TRAIN_INPUTS ${KIPP_TRAIN_CONFIG} ${KIPP_TRAIN_TOKENIZER} ${KIPP_TRAIN_CORPUS})
set(KIPP_TRAIN_SETS "--set tokenizer=${KIPP_TRAIN_TOKENIZER} --set data.train=[${KIPP_TRAIN_CORPUS}]")

# A fixed snapshot of the project's documentation (README.md and docs/*.md of 2026-12-03):
# tests that count steps and epochs must not move when the documentation is edited.
add_test(NAME train_corpus
         COMMAND sh -c "mkdir -p ${KIPP_TRAIN_WORK} && cp ${CMAKE_CURRENT_SOURCE_DIR}/train/corpus.md ${KIPP_TRAIN_CORPUS}")
set_tests_properties(train_corpus PROPERTIES FIXTURES_SETUP train_corpus)

add_test(NAME train_help COMMAND $<TARGET_FILE:kipp> train --help)
set_tests_properties(train_help PROPERTIES PASS_REGULAR_EXPRESSION "--resume.*--init.*kipp convert")

add_test(NAME train_tiny_run
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/train_run.sh $<TARGET_FILE:kipp> ${KIPP_TRAIN_INPUTS}
                 ${KIPP_TRAIN_WORK}/run)
set_tests_properties(train_tiny_run PROPERTIES FIXTURES_REQUIRED "tiny_hf;train_corpus" FIXTURES_SETUP train_run
                     TIMEOUT 600 PASS_REGULAR_EXPRESSION "PASS")

add_test(NAME train_resume_bitwise
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/train_resume.sh $<TARGET_FILE:kipp> ${KIPP_TRAIN_INPUTS}
                 ${KIPP_TRAIN_WORK}/resume)
set_tests_properties(train_resume_bitwise PROPERTIES FIXTURES_REQUIRED "tiny_hf;train_corpus" TIMEOUT 900)
add_test(NAME train_resume_bitwise_bf16
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/train_resume.sh $<TARGET_FILE:kipp> ${KIPP_TRAIN_INPUTS}
                 ${KIPP_TRAIN_WORK}/resume-bf16 --set train.precision=bf16)
set_tests_properties(train_resume_bitwise_bf16 PROPERTIES FIXTURES_REQUIRED "tiny_hf;train_corpus" TIMEOUT 900)

# Export: kipp convert on the trained checkpoint, then the engine against the trainer's forward.
add_executable(train_export_check integration/train_export_check.cpp)
target_compile_options(train_export_check PRIVATE ${KIPP_WARNINGS})
target_link_libraries(train_export_check PRIVATE kipplib)
# PASS_REGULAR_EXPRESSION ignores the exit status, so these tests print "exit 0" only on success.
add_test(NAME train_export_convert
         COMMAND sh -c "$<TARGET_FILE:kipp> convert ${KIPP_TRAIN_WORK}/run/latest -o ${KIPP_TRAIN_WORK}/run.gguf && echo 'exit 0'")
set_tests_properties(train_export_convert PROPERTIES FIXTURES_REQUIRED train_run FIXTURES_SETUP train_gguf
                     PASS_REGULAR_EXPRESSION "provenance local.*exit 0")
add_test(NAME train_export_logits
         COMMAND train_export_check ${KIPP_TRAIN_WORK}/run/latest ${KIPP_TRAIN_WORK}/run.gguf)
set_tests_properties(train_export_logits PROPERTIES FIXTURES_REQUIRED "train_run;train_gguf")
add_test(NAME train_export_generate
         COMMAND $<TARGET_FILE:kipp> generate -m ${KIPP_TRAIN_WORK}/run.gguf --prompt "Kipp" --max-tokens 8 --temp 0)
set_tests_properties(train_export_generate PROPERTIES FIXTURES_REQUIRED train_gguf)

# Clear errors (exit status 1 and one line naming the problem): an unknown key, a bad value
# through --set, a run whose loss goes non-finite.
set(KIPP_EXPECT_ERROR ${CMAKE_CURRENT_SOURCE_DIR}/integration/expect_error.sh)
add_test(NAME train_rejects_unknown_key
         COMMAND ${KIPP_EXPECT_ERROR} "train\\.max_stepz" $<TARGET_FILE:kipp> train --config ${KIPP_TRAIN_CONFIG}
                 --set train.max_stepz=3)
add_test(NAME train_rejects_bad_value
         COMMAND ${KIPP_EXPECT_ERROR} "train\\.max_steps.*abc" $<TARGET_FILE:kipp> train --config ${KIPP_TRAIN_CONFIG}
                 --set train.max_steps=abc)
add_test(NAME train_stops_on_non_finite
         COMMAND ${KIPP_EXPECT_ERROR} "consecutive steps were skipped \\(the last: non-finite (loss|gradient)\\)" $<TARGET_FILE:kipp> train
                 --config ${KIPP_TRAIN_CONFIG} --set tokenizer=${KIPP_TRAIN_TOKENIZER}
                 --set data.train=[${KIPP_TRAIN_CORPUS}] --set run.dir=${KIPP_TRAIN_WORK}/diverge
                 --set train.lr=1e30 --set train.min_lr=1e29 --set train.warmup_steps=0 --set train.grad_clip=0
                 --set train.max_steps=20)
set_tests_properties(train_stops_on_non_finite PROPERTIES FIXTURES_REQUIRED "tiny_hf;train_corpus")

# Fine-tuning starts from trained weights: a checkpoint folder and the exported GGUF.
foreach(source checkpoint gguf)
  if(source STREQUAL "checkpoint")
    set(init ${KIPP_TRAIN_WORK}/run/latest)
  else()
    set(init ${KIPP_TRAIN_WORK}/run.gguf)
  endif()
  add_test(NAME train_init_from_${source}
           COMMAND sh -c "rm -rf ${KIPP_TRAIN_WORK}/init-${source} && $<TARGET_FILE:kipp> train --config ${KIPP_TRAIN_CONFIG} ${KIPP_TRAIN_SETS} --set run.dir=${KIPP_TRAIN_WORK}/init-${source} --set train.max_steps=2 --set train.warmup_steps=1 --set eval.every=1 --init ${init} && echo 'exit 0'")
  set_tests_properties(train_init_from_${source} PROPERTIES FIXTURES_REQUIRED "train_run;train_gguf;train_corpus"
                       TIMEOUT 300 PASS_REGULAR_EXPRESSION "initialized from ${init}.*eval step 1: val loss [0-9]\\..*exit 0")
endforeach()

# Checkpoint averaging: the mean of the last two checkpoints is a model folder that converts.
add_test(NAME train_average_checkpoints
         COMMAND sh -c "rm -rf ${KIPP_TRAIN_WORK}/avg && $<TARGET_FILE:kipp> average $(ls -d ${KIPP_TRAIN_WORK}/run/checkpoints/step-* | tail -2) -o ${KIPP_TRAIN_WORK}/avg && $<TARGET_FILE:kipp> convert ${KIPP_TRAIN_WORK}/avg -o ${KIPP_TRAIN_WORK}/avg.gguf && echo 'exit 0'")
set_tests_properties(train_average_checkpoints PROPERTIES FIXTURES_REQUIRED train_run TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "averaged 2 checkpoints.*provenance local.*exit 0")

# The data side: SFT on conversations with assistant-only loss, data preview, malformed records,
# kipp eval on the checkpoint and its GGUF (cache reused), CSV input.
add_test(NAME train_data_cli
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/train_data_cli.sh $<TARGET_FILE:kipp> ${KIPP_TRAIN_INPUTS}
                 ${KIPP_TRAIN_WORK}/run/latest ${KIPP_TRAIN_WORK}/run.gguf ${KIPP_TRAIN_WORK}/data)
set_tests_properties(train_data_cli PROPERTIES FIXTURES_REQUIRED "train_run;train_gguf;train_corpus" TIMEOUT 600
                     PASS_REGULAR_EXPRESSION "PASS")

# The quickstart script end to end (fortunes corpus, tokenizer, training, export, samples, the
# baseline line) with the built binary and a few steps; the full run is measured in README.
add_test(NAME quickstart_smoke
         COMMAND sh -c "KIPP_QUICKSTART_BIN=$<TARGET_FILE:kipp> KIPP_QUICKSTART_DIR=${CMAKE_BINARY_DIR}/quickstart ${CMAKE_SOURCE_DIR}/scripts/quickstart.sh --steps 30 2>&1")
set_tests_properties(quickstart_smoke PROPERTIES TIMEOUT 600
                     PASS_REGULAR_EXPRESSION "final validation loss [0-9.]+ vs unigram baseline [0-9.]+.*quickstart finished")

# BF16 products against FP32 on the quickstart recipe, shortened: final validation losses within 1%.
add_test(NAME train_precision_quickstart
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/train_precision_quickstart.sh $<TARGET_FILE:kipp>
                 ${CMAKE_BINARY_DIR}/precision-quickstart 120)
set_tests_properties(train_precision_quickstart PROPERTIES TIMEOUT 900 PASS_REGULAR_EXPRESSION "PASS")

# The data-side commands explain themselves.
foreach(command "eval" "data;preview" "plot" "tokenizer;encode")
  string(REPLACE ";" "_" name "${command}")
  add_test(NAME help_${name} COMMAND $<TARGET_FILE:kipp> ${command} --help)
  set_tests_properties(help_${name} PROPERTIES PASS_REGULAR_EXPRESSION "Usage:.*Options:")
endforeach()

# --init fills the model section from the source: the fine-tune config (no model section) runs
# from the tiny HF folder, its GGUF (whose tokenizer is set here: a GGUF has no tokenizer.json)
# and the 0.6b-shaped HF folder, and each checkpoint has the source's config.
set(KIPP_FINETUNE_CONFIG ${CMAKE_SOURCE_DIR}/configs/finetune-qwen3-0.6b.yaml)
set(KIPP_INIT_SCRIPT ${CMAKE_CURRENT_SOURCE_DIR}/integration/train_init_source.sh)
add_test(NAME train_init_fills_model_tiny_hf
         COMMAND ${KIPP_INIT_SCRIPT} $<TARGET_FILE:kipp> ${KIPP_FINETUNE_CONFIG} ${KIPP_TRAIN_CORPUS}
                 ${KIPP_MODELS}/tiny-hf ${KIPP_MODELS}/tiny-hf/config.json ${KIPP_TRAIN_WORK}/init-tiny-hf)
add_test(NAME train_init_fills_model_tiny_gguf
         COMMAND ${KIPP_INIT_SCRIPT} $<TARGET_FILE:kipp> ${KIPP_FINETUNE_CONFIG} ${KIPP_TRAIN_CORPUS}
                 ${KIPP_MODELS}/tiny-bf16.gguf ${KIPP_MODELS}/tiny-hf/config.json ${KIPP_TRAIN_WORK}/init-tiny-gguf
                 --set tokenizer=${KIPP_TRAIN_TOKENIZER})
add_test(NAME train_init_fills_model_0.6b_hf
         COMMAND ${KIPP_INIT_SCRIPT} $<TARGET_FILE:kipp> ${KIPP_FINETUNE_CONFIG} ${KIPP_TRAIN_CORPUS}
                 ${KIPP_MODELS}/qwen3-0.6b-hf ${KIPP_MODELS}/qwen3-0.6b-hf/config.json ${KIPP_TRAIN_WORK}/init-0.6b-hf)
set_tests_properties(train_init_fills_model_tiny_hf PROPERTIES FIXTURES_REQUIRED "tiny_hf;train_corpus" TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "PASS")
set_tests_properties(train_init_fills_model_tiny_gguf PROPERTIES FIXTURES_REQUIRED "gguf_tiny_bf16;train_corpus"
                     TIMEOUT 300 PASS_REGULAR_EXPRESSION "PASS")
set_tests_properties(train_init_fills_model_0.6b_hf PROPERTIES FIXTURES_REQUIRED "hf_06b;train_corpus" TIMEOUT 900
                     RESOURCE_LOCK big_memory PASS_REGULAR_EXPRESSION "PASS")

# A model key that disagrees with the source is one error naming it and both values.
set(KIPP_INIT_SETS --set data.train=[${KIPP_TRAIN_CORPUS}] --set run.dir=${KIPP_TRAIN_WORK}/init-refused)
add_test(NAME train_init_refuses_rope_theta
         COMMAND ${KIPP_EXPECT_ERROR} "error: --set model\\.rope_theta: set to 10000 but .*qwen3-0\\.6b-hf has 1000000$"
                 $<TARGET_FILE:kipp> train --config ${KIPP_FINETUNE_CONFIG} --init ${KIPP_MODELS}/qwen3-0.6b-hf
                 ${KIPP_INIT_SETS} --set model.rope_theta=10000)
add_test(NAME train_init_refuses_dimension
         COMMAND ${KIPP_EXPECT_ERROR} "error: --set model\\.d_model: set to 768 but .*qwen3-0\\.6b-q8_0\\.gguf has 1024$"
                 $<TARGET_FILE:kipp> train --config ${KIPP_FINETUNE_CONFIG} --init ${KIPP_MODELS}/qwen3-0.6b-q8_0.gguf
                 ${KIPP_INIT_SETS} --set tokenizer=${KIPP_TRAIN_TOKENIZER} --set model.d_model=768)
# Two disagreements are two lines, each naming its key.
add_test(NAME train_init_refuses_vocabulary_and_tying
         COMMAND sh -c "out=$(${KIPP_EXPECT_ERROR} 'error: --set model.vocab_size: set to 151669 but .*tiny-hf has 151936$' $<TARGET_FILE:kipp> train --config ${KIPP_FINETUNE_CONFIG} --init ${KIPP_MODELS}/tiny-hf --set data.train=[${KIPP_TRAIN_CORPUS}] --set model.vocab_size=151669 --set model.weight_tying=false) && echo \"$out\" | grep -E '^--set model.weight_tying: set to false but .*tiny-hf has true$'")
set_tests_properties(train_init_refuses_rope_theta PROPERTIES FIXTURES_REQUIRED hf_06b)
set_tests_properties(train_init_refuses_dimension PROPERTIES FIXTURES_REQUIRED "gguf_qwen3-0.6b_q8_0;tiny_hf")
set_tests_properties(train_init_refuses_vocabulary_and_tying PROPERTIES FIXTURES_REQUIRED tiny_hf)

# A registry name means the folder `kipp pull` made (under KIPP_MODELS_DIR): missing, the error
# says what to pull; present (the 0.6b-shaped folder standing in for it), it is the source.
set(KIPP_INIT_PULLED ${KIPP_TRAIN_WORK}/init-pulled)
add_test(NAME train_init_registry_not_pulled
         COMMAND ${CMAKE_COMMAND} -E env KIPP_MODELS_DIR=${KIPP_TRAIN_WORK}/init-not-pulled ${KIPP_EXPECT_ERROR}
                 "error: --init Qwen/Qwen3-0\\.6B: Qwen/Qwen3-0\\.6B has not been pulled .*run `kipp pull Qwen/Qwen3-0\\.6B` first"
                 $<TARGET_FILE:kipp> train --config ${KIPP_FINETUNE_CONFIG} --init Qwen/Qwen3-0.6B ${KIPP_INIT_SETS})
add_test(NAME train_init_registry_pulled
         COMMAND sh -c "rm -rf ${KIPP_INIT_PULLED} && mkdir -p ${KIPP_INIT_PULLED} && ln -s ${KIPP_MODELS}/qwen3-0.6b-hf ${KIPP_INIT_PULLED}/Qwen--Qwen3-0.6B@$(${KIPP_PY} -c 'import json,sys; print(next(c[\"revision\"][:12] for c in json.load(open(sys.argv[1]))[\"checkpoints\"] if c[\"id\"] == \"Qwen/Qwen3-0.6B\"))' ${CMAKE_SOURCE_DIR}/registry/qwen3_dense.json) && KIPP_MODELS_DIR=${KIPP_INIT_PULLED} ${KIPP_EXPECT_ERROR} 'error: --set model.n_layers: set to 2 but qwen3-0.6b has 28$' $<TARGET_FILE:kipp> train --config ${KIPP_FINETUNE_CONFIG} --init qwen3-0.6b --set data.train=[${KIPP_TRAIN_CORPUS}] --set model.n_layers=2")
set_tests_properties(train_init_registry_pulled PROPERTIES FIXTURES_REQUIRED hf_06b PASS_REGULAR_EXPRESSION "PASS")

# Multi-turn qwen3 SFT in the preview, with the real Qwen3 tokenizer: every assistant turn carries
# loss (tool calls included), the first turn's reasoning is dropped as the template drops it, and
# tool definitions, tool responses and questions are context.
add_test(NAME data_preview_qwen3_tools
         COMMAND $<TARGET_FILE:kipp> data preview ${CMAKE_CURRENT_SOURCE_DIR}/train/sft_qwen3_tools.jsonl
                 -t ${KIPP_MODELS}/tiny-bf16.gguf --chat-format qwen3 --no-color --strict -n 1)
set_tests_properties(data_preview_qwen3_tools PROPERTIES FIXTURES_REQUIRED gguf_tiny_bf16 TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "conversation, qwen3.*⟦Hello! Where to.*⟦<think>.*Use the tool.*get_weather.*⟧.*tool_response.*⟦<think>.*Report it.*It is -2 degrees"
                     FAIL_REGULAR_EXPRESSION "Greet back|cannot tokenize|[1-9] malformed|⟦[^⟧]*tool_response|⟦[^⟧]*Weather in Oslo|⟦[^⟧]*# Tools")

# LoRA: `kipp lora merge` against an independent recomputation of W0 + (alpha / r) B A from the
# base and adapter files, the GGUF base giving the HF base's bytes, export, `kipp eval --adapter`
# against the merged folder's loss, and refusals.
add_test(NAME lora_help COMMAND $<TARGET_FILE:kipp> lora merge --help)
set_tests_properties(lora_help PROPERTIES PASS_REGULAR_EXPRESSION "BASE.*ADAPTER.*kipp convert")
add_test(NAME lora_merge_tiny
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/lora_merge.sh $<TARGET_FILE:kipp> ${CMAKE_SOURCE_DIR}
                 ${KIPP_MODELS} ${KIPP_TRAIN_WORK}/lora-merge)
set_tests_properties(lora_merge_tiny PROPERTIES FIXTURES_REQUIRED "tiny_hf;gguf_tiny_bf16" TIMEOUT 600
                     PASS_REGULAR_EXPRESSION "PASS: 8 projections equal.*PASS: the GGUF base.*PASS: the merged folder.*PASS: kipp eval --adapter.*PASS: each refusal")

# LoRA training: needs a base (one clear error without --init); end to end with bitwise resume,
# PEFT checkpoints, merge of the trained adapter and a QLoRA run.
add_test(NAME train_lora_needs_init
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/expect_error.sh "train.lora.rank is 4: .*--init SOURCE"
                 $<TARGET_FILE:kipp> train --config ${KIPP_TRAIN_CONFIG} --set tokenizer=${KIPP_TRAIN_TOKENIZER}
                 --set data.train=[${KIPP_TRAIN_CORPUS}] --set run.dir=${KIPP_TRAIN_WORK}/lora-no-base
                 --set train.lora.rank=4)
set_tests_properties(train_lora_needs_init PROPERTIES FIXTURES_REQUIRED "tiny_hf;train_corpus"
                     PASS_REGULAR_EXPRESSION "PASS: failed cleanly")
add_test(NAME train_lora_resume_merge
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/train_lora.sh $<TARGET_FILE:kipp> ${CMAKE_SOURCE_DIR}
                 ${KIPP_FINETUNE_CONFIG} ${KIPP_TRAIN_CORPUS} ${KIPP_MODELS} ${KIPP_TRAIN_WORK}/lora)
set_tests_properties(train_lora_resume_merge PROPERTIES FIXTURES_REQUIRED "tiny_hf;gguf_tiny_q8_0;train_corpus"
                     TIMEOUT 900 PASS_REGULAR_EXPRESSION "PASS: QLoRA")

# scripts/finetune_example.sh end to end on the synthetic 0.6b-shaped folder, two LoRA steps: it
# trains, merges, exports and generates, and the held-out loss after is below the loss before.
add_test(NAME finetune_example_smoke
         COMMAND sh -c "KIPP_FINETUNE_BIN=$<TARGET_FILE:kipp> KIPP_FINETUNE_DIR=${CMAKE_BINARY_DIR}/finetune-example ${CMAKE_SOURCE_DIR}/scripts/finetune_example.sh --base ${KIPP_MODELS}/qwen3-0.6b-hf --steps 2 2>/dev/null | awk '/^validation loss/ { print; if ($(NF-2) + 0 > $NF + 0) print \"PASS: the loss went down\"; exit }'")
set_tests_properties(finetune_example_smoke PROPERTIES FIXTURES_REQUIRED hf_06b TIMEOUT 900 RESOURCE_LOCK big_memory
                     PASS_REGULAR_EXPRESSION "PASS: the loss went down")
