/* httpd - helpers around libmicrohttpd: responses built from const bodies (see httpd.h). */
#include "httpd.h"

#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

struct MHD_Response *
httpd_response_copy(const char *body, size_t len)
{
	struct MHD_Response *r;
	char *copy;

	/* One byte more so that an empty body is still a valid buffer for MHD to free. */
	if ((copy = malloc(len + 1)) == NULL)
		return NULL;
	if (len > 0)
		memcpy(copy, body, len);
	copy[len] = '\0';
	/* MUST_FREE hands the copy to MHD, which frees it with the response. */
	if ((r = MHD_create_response_from_buffer(len, copy, MHD_RESPMEM_MUST_FREE)) == NULL)
		free(copy);
	return r;
}
