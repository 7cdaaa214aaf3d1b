# Writes OUT: a C++ file defining builtin_residuals_text() from FILE (empty when FILE is absent).
set(text "")
if(EXISTS ${FILE})
  file(READ ${FILE} text)
endif()
file(WRITE ${OUT}.tmp "// Generated from validation/residuals.json; do not edit.\nnamespace parallax {\n\nconst char* builtin_residuals_text() {\n  return R\"PXJSON(${text})PXJSON\";\n}\n\n}  // namespace parallax\n")
file(RENAME ${OUT}.tmp ${OUT})
