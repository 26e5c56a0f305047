# mg_embed(OUT SYMBOL FILES): generate OUT, a C file defining
#   const struct mg_embedded SYMBOL[]; const unsigned SYMBOL_count;
# with each file's base name, bytes and length (bytes are NUL-terminated).
function(mg_embed out symbol files)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DSYMBOL=${symbol} "-DFILES=${files}"
            -P ${CMAKE_SOURCE_DIR}/cmake/embed_run.cmake
    DEPENDS ${files} ${CMAKE_SOURCE_DIR}/cmake/embed_run.cmake
    COMMENT "Embedding ${symbol}"
    VERBATIM)
endfunction()
