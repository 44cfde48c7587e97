// Plain UTF-8 text files as records: the whole file is one document, or a line equal to the
// separator ends one (fortune files use "%"; blank documents are skipped). A document's text is
// the exact bytes of its lines, line ends included. Documents over kTextPieceBytes come in
// pieces cut at line ends (or, inside a longer line, at a character boundary), every piece but
// the last with ends_document = false. A piece with invalid UTF-8 is malformed and skipped.
#pragma once

#include <memory>
#include <string>

#include "data/record_source.h"

namespace kipp::data {

Expected<std::unique_ptr<RecordSource>> open_text_source(const std::string& path, const std::string& separator);

}  // namespace kipp::data
