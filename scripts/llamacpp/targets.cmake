# Included into llama.cpp's top-level project by scripts/bench-vs-llamacpp
# (CMAKE_PROJECT_llama.cpp_INCLUDE): one more program, llama-teacher-forced, built from
# teacher_forced.cpp beside llama-server. Deferred to the end of the top-level CMakeLists, where
# the `llama` library and the output folder (build/bin) are defined.
function(companion_add_teacher_forced)
    add_executable(llama-teacher-forced ${COMPANION_LLAMACPP_DIR}/teacher_forced.cpp)
    target_link_libraries(llama-teacher-forced PRIVATE llama)
endfunction()
set(COMPANION_LLAMACPP_DIR ${CMAKE_CURRENT_LIST_DIR})
cmake_language(DEFER CALL companion_add_teacher_forced)
