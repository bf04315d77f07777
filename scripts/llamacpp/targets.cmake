# Included into llama.cpp's top-level project by scripts/bench-vs-llamacpp
# (CMAKE_PROJECT_llama.cpp_INCLUDE): programs of ours built beside llama-server. Deferred to the
# end of the top-level CMakeLists, where the `llama` library and the output folder (build/bin)
# are defined.
# - llama-teacher-forced (teacher_forced.cpp): log-probs of forced tokens, as the server decodes;
# - llama-mtp-drafts (mtp_drafts.cpp): a Gemma 4 MTP assistant's drafts, as llama.cpp's
#   speculative decoding makes them; it uses llama.cpp's staging API (src/llama-ext.h);
# - llama-mtmd-record (mtmd_record.cpp): what llama.cpp's multimodal library makes of an image
#   in a prompt (the projector's embeddings, then greedy steps), for the vision fixtures.
function(companion_add_programs)
    add_executable(llama-teacher-forced ${COMPANION_LLAMACPP_DIR}/teacher_forced.cpp)
    target_link_libraries(llama-teacher-forced PRIVATE llama)
    add_executable(llama-mtp-drafts ${COMPANION_LLAMACPP_DIR}/mtp_drafts.cpp)
    target_include_directories(llama-mtp-drafts PRIVATE ${CMAKE_SOURCE_DIR}/src)
    target_link_libraries(llama-mtp-drafts PRIVATE llama)
    add_executable(llama-mtmd-record ${COMPANION_LLAMACPP_DIR}/mtmd_record.cpp)
    target_include_directories(llama-mtmd-record PRIVATE ${CMAKE_SOURCE_DIR}/tools/mtmd)
    target_link_libraries(llama-mtmd-record PRIVATE mtmd llama)
endfunction()
set(COMPANION_LLAMACPP_DIR ${CMAKE_CURRENT_LIST_DIR})
cmake_language(DEFER CALL companion_add_programs)
